package cfjs

import (
	"fmt"
	"reflect"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/token"
)

// forbidden names the nodes of syntax runtime 2.0 lacks whatever their content.
var forbidden = map[reflect.Type]string{
	reflect.TypeFor[*ast.ForOfStatement]():   "for...of",
	reflect.TypeFor[*ast.ClassLiteral]():     "class",
	reflect.TypeFor[*ast.ClassDeclaration](): "class",
	reflect.TypeFor[*ast.YieldExpression]():  "yield",
	reflect.TypeFor[*ast.SpreadElement]():    "spread",
	reflect.TypeFor[*ast.ObjectPattern]():    "destructuring",
	reflect.TypeFor[*ast.ArrayPattern]():     "destructuring",
	reflect.TypeFor[*ast.PropertyShort]():    "shorthand property",
	reflect.TypeFor[*ast.OptionalChain]():    "optional chaining",
	reflect.TypeFor[*ast.Optional]():         "optional chaining",
}

// checkSyntax refuses the syntax goja parses but runtime 2.0 does not list:
// its features are ES 5.1 plus const, let, async and await (top-level
// functions only: "async arguments and closures are not supported"),
// template literals, arrow functions, rest parameters and **. See
// https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/functions-javascript-runtime-20.html
func checkSyntax(prog *ast.Program) error {
	top := map[*ast.FunctionLiteral]bool{}
	for _, s := range prog.Body {
		if d, ok := s.(*ast.FunctionDeclaration); ok {
			top[d.Function] = true
		}
	}
	var walk func(v reflect.Value) error
	walk = func(v reflect.Value) error {
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if v.IsNil() {
				return nil
			}
			if n, ok := v.Interface().(ast.Node); ok && v.Kind() == reflect.Pointer {
				if what := unsupported(n, top); what != "" {
					return fmt.Errorf("cfjs: %s: %s is not supported by cloudfront-js-2.0", prog.File.Position(int(n.Idx0())), what)
				}
			}
			return walk(v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				if !v.Type().Field(i).IsExported() { // file.File's fields, no node
					continue
				}
				if err := walk(v.Field(i)); err != nil {
					return err
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				if err := walk(v.Index(i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(reflect.ValueOf(prog))
}

// unsupported names the construct n is if the runtime lacks it, else "";
// top holds the top-level function declarations, the only ones that may be async.
func unsupported(n ast.Node, top map[*ast.FunctionLiteral]bool) string {
	if what, ok := forbidden[reflect.TypeOf(n)]; ok {
		return what
	}
	switch n := n.(type) {
	case *ast.FunctionLiteral:
		if n.Generator {
			return "generator function"
		}
		if n.Async && !top[n] {
			return "async closure"
		}
	case *ast.ArrowFunctionLiteral:
		if n.Async {
			return "async closure"
		}
	case *ast.ParameterList:
		for _, p := range n.List {
			if p.Initializer != nil {
				return "default parameter"
			}
		}
	case *ast.PropertyKeyed:
		if n.Computed {
			return "computed property name"
		}
		if n.Kind == ast.PropertyKindMethod {
			return "method shorthand"
		}
	case *ast.BinaryExpression:
		if n.Operator == token.COALESCE {
			return "??"
		}
	case *ast.AssignExpression: // the parser keeps &&=, ||= and ??= as &&, || and ??
		if n.Operator == token.COALESCE || n.Operator == token.LOGICAL_AND || n.Operator == token.LOGICAL_OR {
			return "logical assignment"
		}
	}
	return ""
}
