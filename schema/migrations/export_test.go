package migrations

// AlreadyExists is alreadyExists, for the tests of package migrations_test.
var AlreadyExists = alreadyExists
