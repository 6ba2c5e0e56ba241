package schema

// AlreadyExists is alreadyExists, for the tests of package schema_test.
var AlreadyExists = alreadyExists
