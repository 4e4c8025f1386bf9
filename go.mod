module github.com/m0serve/m0

go 1.26.8
