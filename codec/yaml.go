package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// MaxYAMLNodes bounds the nodes of a YAML document once its aliases are
// expanded, on top of four times the nodes written out: anchors and aliases
// may shorten a document, not blow it up ("billion laughs").
const MaxYAMLNodes = 100000

// DefaultYAMLAliasBytes is DecodeYAML's bound on the bytes that aliases add
// to a document (DecodeYAMLLimit).
const DefaultYAMLAliasBytes = 3 << 20

// DecodeYAML is DecodeYAMLLimit with DefaultYAMLAliasBytes.
func DecodeYAML(data []byte) (any, []string, error) {
	return DecodeYAMLLimit(data, DefaultYAMLAliasBytes)
}

// DecodeYAMLLimit decodes one YAML document into the generic form DecodeJSON
// returns, with YAML 1.1 scalars as Kubernetes reads them (yes/no are
// booleans). It reports duplicate mapping keys by field path, like
// DecodeJSON. It refuses documents nested deeper than MaxDepth (YAML's own
// limit is lower), several documents in one body, values JSON cannot hold
// (.inf, NaN, non-string keys that are not scalars), and documents whose
// aliases expand them by more than MaxYAMLNodes nodes or aliasBytes bytes
// (scalar bytes plus two a node): both are checked on the parsed tree,
// before anything is expanded, so a small body cannot become a large value.
func DecodeYAMLLimit(data []byte, aliasBytes int) (any, []string, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var doc yamlv3.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("yaml: the document is empty")
		}
		return nil, nil, fmt.Errorf("yaml: %w", trimYAMLError(err))
	}
	var extra yamlv3.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, errors.New("yaml: the body holds more than one document")
	} else if !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("yaml: %w", trimYAMLError(err))
	}
	c := yamlCheck{sizes: map[*yamlv3.Node]yamlSize{}, aliasLimit: aliasBytes}
	c.literal(&doc)
	c.limit = MaxYAMLNodes + 4*c.literals
	if _, err := c.expanded(&doc, 0, []pathElem{}); err != nil {
		return nil, nil, err
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, err
	}
	v, _, err := DecodeJSON(j)
	if err != nil {
		return nil, nil, err
	}
	return v, c.dups, nil
}

type yamlCheck struct {
	literals   int
	limit      int // nodes, expanded
	aliasLimit int // bytes added by aliases
	aliasBytes int
	sizes      map[*yamlv3.Node]yamlSize // expanded size of anchored nodes
	dups       []string
}

// yamlSize is the size of a node with its aliases expanded.
type yamlSize struct {
	nodes, bytes int
}

// literal counts the nodes written out in the document.
func (c *yamlCheck) literal(n *yamlv3.Node) {
	c.literals++
	for _, ch := range n.Content {
		c.literal(ch)
	}
}

// expanded returns the size of n with its aliases expanded, failing beyond
// the budgets or MaxDepth, and collects duplicate keys (outside aliases).
func (c *yamlCheck) expanded(n *yamlv3.Node, depth int, path []pathElem) (yamlSize, error) {
	if depth > MaxDepth {
		return yamlSize{}, fmt.Errorf("yaml: exceeded max depth of %d", MaxDepth)
	}
	if n.Kind == yamlv3.AliasNode {
		if n.Alias == nil {
			return yamlSize{}, errors.New("yaml: unknown anchor")
		}
		s, ok := c.sizes[n.Alias]
		if !ok {
			// An alias refers to an earlier anchor, so there are no cycles;
			// but an anchor's size is computed once.
			var err error
			if s, err = c.expanded(n.Alias, depth+1, nil); err != nil {
				return yamlSize{}, err
			}
			c.sizes[n.Alias] = s
		}
		c.aliasBytes += s.bytes
		if c.aliasBytes > c.aliasLimit {
			return yamlSize{}, fmt.Errorf("yaml: the document's aliases expand it by more than %d bytes", c.aliasLimit)
		}
		return s, nil
	}
	size := yamlSize{nodes: 1, bytes: len(n.Value) + 2}
	var seen map[string]bool
	if n.Kind == yamlv3.MappingNode && path != nil {
		seen = map[string]bool{}
	}
	for i, ch := range n.Content {
		var childPath []pathElem
		if path != nil {
			switch n.Kind {
			case yamlv3.MappingNode:
				if i%2 == 1 && n.Content[i-1].Kind == yamlv3.ScalarNode {
					key := n.Content[i-1].Value
					childPath = append(path[:len(path):len(path)], pathElem{key: key, index: -1})
					if key != "<<" {
						if seen[key] {
							c.dups = append(c.dups, renderPath(childPath))
						}
						seen[key] = true
					}
				}
			case yamlv3.SequenceNode:
				childPath = append(path[:len(path):len(path)], pathElem{index: i})
			case yamlv3.DocumentNode:
				childPath = path
			}
		}
		s, err := c.expanded(ch, depth+1, childPath)
		if err != nil {
			return yamlSize{}, err
		}
		size.nodes += s.nodes
		size.bytes += s.bytes
		if size.nodes > c.limit {
			return yamlSize{}, fmt.Errorf("yaml: the document expands to more than %d nodes through its aliases", c.limit)
		}
	}
	if n.Anchor != "" {
		c.sizes[n] = size
	}
	return size, nil
}

func trimYAMLError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return errors.New(msg)
}

// JSONToYAML converts a JSON document to YAML the way kube-apiserver writes
// it (keys sorted, block style).
func JSONToYAML(j []byte) ([]byte, error) {
	return yaml.JSONToYAML(j)
}
