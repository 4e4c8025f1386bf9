package cpython

const libraryExt = ".dylib"
