package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The kubeconfig's names are the sandbox's (crates/sandbox/src/sandbox.rs), so that a test or a
// person switches between `lien sandbox` and this control plane by KUBECONFIG alone.
const (
	clusterName    = "lien-sandbox"
	adminUser      = "sandbox-admin"
	adminContext   = "sandbox"
	secondUser     = "sandbox-user"
	secondContext  = "sandbox-user"
	secondUserOrg  = "developers"
	mastersGroup   = "system:masters"
	controllerUser = "system:kube-controller-manager" // bound to its role by RBAC's bootstrap policy
	// The user kube-apiserver's webhook calls come as, from the admission client CA.
	admissionClientUser = "kube-apiserver-admission"
)

type user struct {
	name string
	cert *issued
	// token, when set, authenticates the user instead of cert (kube-apiserver's
	// --token-auth-file).
	token string
}

// tokenUser is a user of the static token file: the sandbox's users, with the sandbox's uids
// and groups (crates/sandbox/src/sandbox.rs), so that an AdmissionReview's or a
// SelfSubjectReview's userInfo is the same on both servers for the same request.
type tokenUser struct {
	name, uid, group string
}

var tokenUsers = []tokenUser{
	{adminUser, "sandbox-admin-uid", mastersGroup},
	{secondUser, "sandbox-user-uid", secondUserOrg},
}

// tokenFile renders kube-apiserver's --token-auth-file: `token,user,uid,"group"` per line.
func tokenFile(tokens []string) []byte {
	var b []byte
	for i, u := range tokenUsers {
		b = fmt.Appendf(b, "%s,%s,%s,%q\n", tokens[i], u.name, u.uid, u.group)
	}
	return b
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// kubeconfig renders a kubeconfig (JSON, which is YAML) with one context per user, the first
// current; certificates are inline, so the file alone is enough.
func kubeconfig(server string, caPEM []byte, users []user, contexts []string) ([]byte, error) {
	type named map[string]any
	var us, cs []named
	for i, u := range users {
		credentials := map[string]string{"token": u.token}
		if u.token == "" {
			credentials = map[string]string{
				"client-certificate-data": b64(u.cert.certPEM),
				"client-key-data":         b64(u.cert.keyPEM),
			}
		}
		us = append(us, named{"name": u.name, "user": credentials})
		cs = append(cs, named{"name": contexts[i], "context": map[string]string{
			"cluster": clusterName, "user": u.name, "namespace": "default",
		}})
	}
	doc := named{
		"apiVersion": "v1",
		"kind":       "Config",
		"clusters": []named{{"name": clusterName, "cluster": map[string]string{
			"server":                     server,
			"certificate-authority-data": b64(caPEM),
		}}},
		"users":           us,
		"contexts":        cs,
		"current-context": contexts[0],
	}
	return json.MarshalIndent(doc, "", "  ")
}

// admissionConfiguration writes the AdmissionConfiguration that makes kube-apiserver present
// the admission client certificate to every webhook, and returns its path. The webhook kubeconfig
// keys users by the webhook's host; `*` matches any, which the tests need since their webhooks
// listen on ephemeral 127.0.0.1 ports.
func admissionConfiguration(dir string, client *issued) (string, error) {
	crt, key, err := client.write(dir, "admission-client")
	if err != nil {
		return "", err
	}
	webhookKubeconfig := map[string]any{
		"apiVersion": "v1",
		"kind":       "Config",
		"users": []map[string]any{{
			"name": "*",
			"user": map[string]string{"client-certificate": crt, "client-key": key},
		}},
	}
	kc, err := json.MarshalIndent(webhookKubeconfig, "", "  ")
	if err != nil {
		return "", err
	}
	kcPath := filepath.Join(dir, "webhook.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return "", err
	}
	plugin := func(name string) map[string]any {
		return map[string]any{
			"name": name,
			"configuration": map[string]any{
				"apiVersion":     "apiserver.config.k8s.io/v1",
				"kind":           "WebhookAdmissionConfiguration",
				"kubeConfigFile": kcPath,
			},
		}
	}
	config := map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AdmissionConfiguration",
		"plugins": []map[string]any{
			plugin("ValidatingAdmissionWebhook"),
			plugin("MutatingAdmissionWebhook"),
		},
	}
	text, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "admission-configuration.yaml")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
