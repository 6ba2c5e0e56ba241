package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// DecodeYAMLStrict decodes the single YAML document in data into v, rejecting fields
// that v's struct types do not declare. It returns an error that names the first
// unknown or mistyped field, with its line.
func DecodeYAMLStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("more than one YAML document")
	}
	return nil
}

// YAMLDocuments splits a multi-document YAML stream into its documents, each decoded
// into a generic yaml.Node (comments and line numbers kept). Empty and comment-only documents
// are skipped.
func YAMLDocuments(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) == 0 || n.Content[0].Kind == 0 ||
			(n.Content[0].Kind == yaml.ScalarNode && n.Content[0].ShortTag() == "!!null") {
			continue // empty, or only comments
		}
		docs = append(docs, &n)
	}
}
