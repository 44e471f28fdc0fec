// Command genschemas writes the components/schemas of docs/openapi.yaml from internal/api's Go types,
// between the document's two marker lines, leaving the rest as it is. Run it with go generate.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"
	"gopkg.in/yaml.v3"

	"github.com/example/waitingroom/internal/api"
)

const (
	// The lines that enclose the generated schemas in the document.
	beginMarker   = "    # Generated from internal/api by go generate: do not edit.\n"
	endMarker     = "    # End of the generated schemas.\n"
	apiImportPath = "github.com/example/waitingroom/internal/api"
)

// wireTypes are the bodies of the API, each one schema of the same name.
var wireTypes = []any{api.Token{}, api.Program{}, api.ProgramSettings{}, api.Admission{}, api.Error{}, api.ProgramList{}, api.Change{}, api.ChangeList{}, api.TokenRecord{}, api.BypassRequest{}, api.BypassPasses{}, api.Challenge{}, api.PushSubscription{}, api.EnterRequest{}, api.HandoffRequest{}, api.Handoff{}, api.RedeemRequest{},
	api.SigningKeys{}, api.KeyRotation{}, api.KeyRevocation{}, api.EdgeKeys{}, api.EdgeRotation{}, api.Report{}}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genschemas path/to/openapi.yaml")
		os.Exit(2)
	}
	doc, err := os.ReadFile(os.Args[1])
	if err == nil {
		doc, err = withSchemas(doc, ".") // go generate runs in internal/api
	}
	if err == nil {
		err = os.WriteFile(os.Args[1], doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genschemas:", err)
		os.Exit(1)
	}
}

// withSchemas returns doc with the schemas reflected from the Go source in apiDir (internal/api,
// relative to the working directory) between its markers.
func withSchemas(doc []byte, apiDir string) ([]byte, error) {
	before, rest, ok := bytes.Cut(doc, []byte(beginMarker))
	_, after, ok2 := bytes.Cut(rest, []byte(endMarker))
	if !ok || !ok2 {
		return nil, errors.New("the document lacks the generated schemas' marker lines")
	}
	schemas, err := schemasYAML(apiDir)
	if err != nil {
		return nil, err
	}
	return bytes.Join([][]byte{before, []byte(beginMarker), schemas, []byte(endMarker), after}, nil), nil
}

// schemasYAML is the schemas, indented as under components/schemas.
func schemasYAML(apiDir string) ([]byte, error) {
	r := &jsonschema.Reflector{Anonymous: true, Mapper: mapType}
	// AddGoComments keys comments by base joined with the directory walked.
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(apiDir)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(abs, wd)
	if err != nil {
		return nil, err
	}
	base := path.Join(apiImportPath, filepath.ToSlash(rel))
	if err := r.AddGoComments(base, apiDir, jsonschema.WithFullComment()); err != nil {
		return nil, fmt.Errorf("read the comments of %s: %w", apiDir, err)
	}
	defs := jsonschema.Definitions{}
	for _, v := range wireTypes {
		maps.Copy(defs, r.Reflect(v).Definitions)
	}
	b, err := json.Marshal(defs)
	if err != nil {
		return nil, err
	}
	b = bytes.ReplaceAll(b, []byte(`"#/$defs/`), []byte(`"#/components/schemas/`))
	var node yaml.Node
	if err := yaml.Unmarshal(b, &node); err != nil {
		return nil, err
	}
	blockStyle(&node)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return nil, err
	}
	return []byte("    " + strings.ReplaceAll(strings.TrimSuffix(out.String(), "\n"), "\n", "\n    ") + "\n"), nil
}

// mapType gives the schema of the API's types that are not what their Go kind says.
func mapType(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeFor[api.Time]():
		return &jsonschema.Schema{Type: "string", Format: "date-time"}
	case reflect.TypeFor[api.Rate]():
		return &jsonschema.Schema{Type: "number"}
	case reflect.TypeFor[api.Status]():
		return &jsonschema.Schema{Type: "string",
			Enum: []any{api.StatusWaiting, api.StatusAdmitted, api.StatusExpired, api.StatusLeft, api.StatusRevoked, api.StatusMoved}}
	case reflect.TypeFor[api.KeyState]():
		return &jsonschema.Schema{Type: "string",
			Enum: []any{api.KeyNext, api.KeySigning, api.KeyPublished, api.KeyRetired, api.KeyRevoked, api.KeyUnusable}}
	}
	return nil
}

// blockStyle clears the JSON styles of n and its children, so that the encoder writes block YAML
// and quotes only where needed.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}
