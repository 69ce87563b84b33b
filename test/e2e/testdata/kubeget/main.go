// Command kubeget lists the pods of its own namespace through the
// apiserver with the pod's service account credentials, verifying the
// apiserver's certificate against the mounted ca.crt: what an in-cluster
// client does. It runs inside a test container (busybox's wget cannot
// verify TLS certificates). The apiserver address comes from $APISERVER
// (host:port), as the test cluster has no kube-proxy for the Service VIP.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	if err := run(); err != nil {
		fmt.Println("kubeget error:", err)
		os.Exit(1)
	}
}

func run() error {
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		return err
	}
	ns, err := os.ReadFile(sa + "namespace")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in ca.crt")
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest("GET", "https://"+os.Getenv("APISERVER")+"/api/v1/namespaces/"+string(ns)+"/pods", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return err
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Metadata.Name)
	}
	fmt.Printf("kubeget ok: namespace=%s pods=%s\n", ns, strings.Join(names, ","))
	return nil
}
