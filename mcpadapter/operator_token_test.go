package mcpadapter_test

// testOperator is the daemon's operator token in these tests.
const testOperator = "fso_operator-token-of-the-test"
