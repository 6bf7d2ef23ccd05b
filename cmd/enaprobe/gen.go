package main

// docs/cli.md, the command-line reference, is generated from the cobra
// commands themselves by TestCLIReference (clidoc_test.go), which also fails
// when the file differs from what the commands generate.
//go:generate go test -count=1 -run ^TestCLIReference$ . -update-cli-reference
