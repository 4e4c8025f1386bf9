package cpython

// libraryExt is how a shared library's name ends here.
const libraryExt = ".so"
