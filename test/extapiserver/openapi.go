package extapiserver

import (
	"encoding/json"
	"net/http"
)

// The server's OpenAPI v3: a root naming its group version's document, and the document with
// the flunders paths (kubectl finds the kind, its schema for explain, and the fieldValidation
// parameter that tells it the server validates fields) and the Flunder schema.

const openAPIRoot = "/openapi/v3"

var flunderGVK = []map[string]string{{"group": Group, "version": Version, "kind": Kind}}

// flunderSchema is the component name of Flunder.
const flunderSchema = "com.example.wardle.v1alpha1.Flunder"

func openAPIDocument() map[string]any {
	ref := map[string]any{"$ref": "#/components/schemas/" + flunderSchema}
	ok := func(schema any) map[string]any {
		return map[string]any{"200": map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": schema}}}}
	}
	param := func(name, in string, required bool) map[string]any {
		return map[string]any{"name": name, "in": in, "required": required, "schema": map[string]any{"type": "string"}}
	}
	op := func(id, action string, extra ...map[string]any) map[string]any {
		o := map[string]any{"operationId": id, "x-kubernetes-action": action, "x-kubernetes-group-version-kind": flunderGVK[0], "responses": ok(ref)}
		if len(extra) > 0 {
			o["parameters"] = extra
		}
		return o
	}
	body := func(mediaType string) map[string]any {
		return map[string]any{"content": map[string]any{mediaType: map[string]any{"schema": ref}}}
	}
	create := op("createNamespacedFlunder", "post", param("fieldValidation", "query", false))
	create["requestBody"] = body("application/json")
	patch := op("patchNamespacedFlunder", "patch", param("fieldValidation", "query", false))
	patch["requestBody"] = body("application/merge-patch+json")
	base := "/apis/" + GroupVersion + "/namespaces/{namespace}/" + Resource
	return map[string]any{
		"openapi": "3.0.0",
		"info":    map[string]any{"title": "extapiserver", "version": Version},
		"paths": map[string]any{
			base: map[string]any{
				"parameters": []any{param("namespace", "path", true)},
				"get":        op("listNamespacedFlunder", "list"),
				"post":       create,
			},
			base + "/{name}": map[string]any{
				"parameters": []any{param("namespace", "path", true), param("name", "path", true)},
				"get":        op("readNamespacedFlunder", "get"),
				"delete":     op("deleteNamespacedFlunder", "delete"),
				"patch":      patch,
			},
		},
		"components": map[string]any{"schemas": map[string]any{
			flunderSchema: map[string]any{
				"type":                            "object",
				"description":                     "Flunder is the test kind of the extension server.",
				"x-kubernetes-group-version-kind": flunderGVK,
				"properties": map[string]any{
					"apiVersion": map[string]any{"type": "string", "description": "APIVersion of the object."},
					"kind":       map[string]any{"type": "string", "description": "Kind of the object."},
					"metadata":   map[string]any{"type": "object", "description": "Standard object metadata."},
					"spec": map[string]any{"type": "object", "description": "What the flunder is.",
						"properties": map[string]any{"reference": map[string]any{"type": "string", "description": "A name it refers to."}}},
				},
			},
		}},
	}
}

// openAPIV2Document is the same in OpenAPI v2: the flunders collection and Flunder.
func openAPIV2Document() map[string]any {
	kind := openAPIDocument()["components"].(map[string]any)["schemas"].(map[string]any)[flunderSchema]
	ref := map[string]any{"$ref": "#/definitions/" + flunderSchema}
	return map[string]any{
		"swagger": "2.0",
		"info":    map[string]any{"title": "extapiserver", "version": Version},
		"paths": map[string]any{
			"/apis/" + GroupVersion + "/namespaces/{namespace}/" + Resource: map[string]any{
				"parameters": []any{map[string]any{"name": "namespace", "in": "path", "required": true, "type": "string"}},
				"get": map[string]any{"operationId": "listNamespacedFlunder", "x-kubernetes-action": "list", "x-kubernetes-group-version-kind": flunderGVK[0],
					"produces": []string{"application/json"}, "responses": map[string]any{"200": map[string]any{"description": "OK", "schema": ref}}},
			},
		},
		"definitions": map[string]any{flunderSchema: kind},
	}
}

// serveOpenAPI answers the v3 root, the group version's v3 document and the v2 document.
func serveOpenAPI(w http.ResponseWriter, path string) bool {
	switch path {
	case "/openapi/v2":
		writeJSON(w, http.StatusOK, openAPIV2Document())
	case openAPIRoot:
		writeJSON(w, http.StatusOK, map[string]any{"paths": map[string]any{
			"apis/" + GroupVersion: map[string]any{"serverRelativeURL": openAPIRoot + "/apis/" + GroupVersion},
		}})
	case openAPIRoot + "/apis/" + GroupVersion:
		data, _ := json.Marshal(openAPIDocument())
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	default:
		return false
	}
	return true
}
