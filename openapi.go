package herald

import _ "embed" // for the go:embed directive below

// OpenAPI is the OpenAPI 3.1 description of Herald's HTTP API, the
// openapi.json file at the module root; the API serves it at
// GET /openapi.json. Tests in internal/api hold it to the routes the API
// serves and to the answers it gives. Read only: never modify it.
//
//go:embed openapi.json
var OpenAPI []byte
