// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

// tlsapp: the Go program bpftel's tests build with Debian's golang-go. Its TLS is Go's
// own crypto/tls, which never loads libssl.
//
//	tlsapp server PORT CERT KEY   HTTPS server on 127.0.0.1:PORT; prints "ready PORT"
//	                              and serves until killed: /items/N answers 200, any
//	                              other path 404
//	tlsapp client URL N [wait]    N GETs of URL on one connection (HTTP/2 unless
//	                              GODEBUG=http2client=0); prints each "STATUS PROTO".
//	                              With wait: prints "started", then waits for a line
//	                              on stdin before the first request
package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
)

func server(port, cert, key string) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/items/") {
			io.WriteString(w, "item\n")
			return
		}
		http.NotFound(w, r)
	})
	fmt.Printf("ready %d\n", ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	err = http.ServeTLS(ln, h, cert, key)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func client(url string, n int) {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		ForceAttemptHTTP2: os.Getenv("GODEBUG") != "http2client=0",
		MaxConnsPerHost:   1,
	}
	c := &http.Client{Transport: tr}
	for i := 0; i < n; i++ {
		resp, err := c.Get(url)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s\n", resp.StatusCode, resp.Proto)
	}
}

func main() {
	if len(os.Args) == 5 && os.Args[1] == "server" {
		server(os.Args[2], os.Args[3], os.Args[4])
	} else if (len(os.Args) == 4 || len(os.Args) == 5) && os.Args[1] == "client" {
		n, err := strconv.Atoi(os.Args[3])
		if len(os.Args) == 5 && os.Args[4] == "wait" {
			fmt.Println("started")
			os.Stdout.Sync()
			bufio.NewReader(os.Stdin).ReadString('\n')
		}
		if err == nil {
			client(os.Args[2], n)
			return
		}
	}
	fmt.Fprintln(os.Stderr, "usage: tlsapp server PORT CERT KEY | tlsapp client URL N [wait]")
	os.Exit(2)
}
