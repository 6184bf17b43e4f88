package meta

import (
	"fmt"
	"strings"
)

// ParseLabelSelector parses a label selector in Kubernetes' string syntax:
// comma-separated requirements, each one of
//
//	key=value  key==value  key!=value
//	key in (v1,v2)  key notin (v1,v2)
//	key  !key
//	key>1  key<1   (integer values)
//
// with whitespace allowed between tokens. The empty string selects
// everything. Keys are qualified names and values label values, validated as
// Kubernetes does; errors are *LabelSelectorError with Kubernetes' messages.
func ParseLabelSelector(selector string) (LabelSelector, error) {
	p := labelParser{lex: labelLexer{s: selector}, sel: selector}
	reqs, err := p.parse()
	if err != nil {
		return LabelSelector{}, &LabelSelectorError{Selector: selector, Msg: err.Error()}
	}
	return NewLabelSelector(reqs...), nil
}

// labelToken is a token of the string syntax.
type labelToken int

const (
	tokEOS labelToken = iota
	tokIdent
	tokNot       // !
	tokEquals    // =
	tokDouble    // ==
	tokNotEquals // !=
	tokIn        // in
	tokNotIn     // notin
	tokOpenPar   // (
	tokClosePar  // )
	tokComma     // ,
	tokGreater   // >
	tokLess      // <
)

type labelLexer struct {
	s   string
	pos int
}

func isLabelSpecial(c byte) bool {
	switch c {
	case '!', '=', '(', ')', ',', '>', '<':
		return true
	}
	return false
}

func isLabelSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// next returns the next token and its literal. In keyword mode "in" and
// "notin" are operators; otherwise they are identifiers.
func (l *labelLexer) next(keywords bool) (labelToken, string) {
	for l.pos < len(l.s) && isLabelSpace(l.s[l.pos]) {
		l.pos++
	}
	if l.pos >= len(l.s) {
		return tokEOS, ""
	}
	c := l.s[l.pos]
	if isLabelSpecial(c) {
		two := ""
		if l.pos+1 < len(l.s) {
			two = l.s[l.pos : l.pos+2]
		}
		switch {
		case two == "!=":
			l.pos += 2
			return tokNotEquals, two
		case two == "==":
			l.pos += 2
			return tokDouble, two
		}
		l.pos++
		switch c {
		case '!':
			return tokNot, "!"
		case '=':
			return tokEquals, "="
		case '(':
			return tokOpenPar, "("
		case ')':
			return tokClosePar, ")"
		case ',':
			return tokComma, ","
		case '>':
			return tokGreater, ">"
		default:
			return tokLess, "<"
		}
	}
	start := l.pos
	for l.pos < len(l.s) && !isLabelSpace(l.s[l.pos]) && !isLabelSpecial(l.s[l.pos]) {
		l.pos++
	}
	lit := l.s[start:l.pos]
	if keywords {
		switch lit {
		case "in":
			return tokIn, lit
		case "notin":
			return tokNotIn, lit
		}
	}
	return tokIdent, lit
}

func (l *labelLexer) peek(keywords bool) (labelToken, string) {
	save := l.pos
	t, lit := l.next(keywords)
	l.pos = save
	return t, lit
}

type labelParser struct {
	lex labelLexer
	sel string
}

func (p *labelParser) parse() ([]LabelRequirement, error) {
	var reqs []LabelRequirement
	for {
		tok, lit := p.lex.peek(false)
		switch tok {
		case tokIdent, tokNot:
			r, err := p.parseRequirement()
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, r)
			t, l := p.lex.next(false)
			switch t {
			case tokEOS:
				return reqs, nil
			case tokComma:
				t2, l2 := p.lex.peek(false)
				if t2 != tokIdent && t2 != tokNot {
					return nil, fmt.Errorf("found '%s', expected: identifier after ','", l2)
				}
			default:
				return nil, fmt.Errorf("found '%s', expected: ',' or 'end of string'", l)
			}
		case tokEOS:
			return reqs, nil
		default:
			return nil, fmt.Errorf("found '%s', expected: !, identifier, or 'end of string'", lit)
		}
	}
}

func (p *labelParser) parseRequirement() (LabelRequirement, error) {
	tok, lit := p.lex.next(false)
	not := false
	if tok == tokNot {
		not = true
		tok, lit = p.lex.next(false)
	}
	if tok != tokIdent {
		if not {
			return LabelRequirement{}, fmt.Errorf("found '%s', expected: identifier after '!'", lit)
		}
		return LabelRequirement{}, fmt.Errorf("found '%s', expected: identifier", lit)
	}
	key := lit
	if msgs := IsQualifiedName(key); len(msgs) > 0 {
		return LabelRequirement{}, Invalid(NewPath("key"), key, strings.Join(msgs, "; "))
	}
	if not {
		return NewLabelRequirement(key, LabelOpDoesNotExist, nil)
	}
	if t, _ := p.lex.peek(true); t == tokEOS || t == tokComma {
		return NewLabelRequirement(key, LabelOpExists, nil)
	}
	opTok, opLit := p.lex.next(true)
	var op string
	switch opTok {
	case tokEquals:
		op = LabelOpEquals
	case tokDouble:
		op = LabelOpDoubleEquals
	case tokNotEquals:
		op = LabelOpNotEquals
	case tokIn:
		op = LabelOpIn
	case tokNotIn:
		op = LabelOpNotIn
	case tokGreater:
		op = LabelOpGreaterThan
	case tokLess:
		op = LabelOpLessThan
	default:
		return LabelRequirement{}, fmt.Errorf("found '%s', expected: in, notin, =, ==, !=, gt, lt", opLit)
	}
	var values []string
	var err error
	if op == LabelOpIn || op == LabelOpNotIn {
		values, err = p.parseValueSet()
	} else {
		values, err = p.parseExactValue()
	}
	if err != nil {
		return LabelRequirement{}, err
	}
	return NewLabelRequirement(key, op, values)
}

// parseExactValue parses the single value after =, ==, !=, > or <; an
// absent value is the empty string.
func (p *labelParser) parseExactValue() ([]string, error) {
	if t, _ := p.lex.peek(false); t == tokEOS || t == tokComma {
		return []string{""}, nil
	}
	t, lit := p.lex.next(false)
	if t != tokIdent {
		return nil, fmt.Errorf("found '%s', expected: identifier", lit)
	}
	return []string{lit}, nil
}

// parseValueSet parses "(v1,v2,...)". Empty entries are empty strings, and
// "()" is the set holding only the empty string, as in Kubernetes.
func (p *labelParser) parseValueSet() ([]string, error) {
	t, lit := p.lex.next(false)
	if t != tokOpenPar {
		return nil, fmt.Errorf("found '%s' expected: '('", lit)
	}
	var values []string
	expectValue := true
	for {
		t, lit = p.lex.next(false)
		switch t {
		case tokIdent:
			if !expectValue {
				return nil, fmt.Errorf("found '%s', expected: ',' or ')'", lit)
			}
			values = append(values, lit)
			expectValue = false
		case tokComma:
			if expectValue {
				values = append(values, "")
			}
			expectValue = true
		case tokClosePar:
			if expectValue {
				values = append(values, "")
			}
			return values, nil
		default:
			return nil, fmt.Errorf("found '%s', expected: ',', ')' or identifier", lit)
		}
	}
}
