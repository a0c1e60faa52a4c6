module github.com/fleetstate/fleetstate

go 1.25.5

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/mark3labs/mcp-go v1.2.1 // indirect
	github.com/spf13/afero v1.15.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
