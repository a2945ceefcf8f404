// Command probe is the program the lab kubelet tests run as a container.
//
//	probe exit N            print "hello from probe", exit with N
//	probe report VAR... -- FILE...   print VAR=value lines and file:PATH=content lines
//	                        (paths under $FEDBR_LAB_ROOT), then write $FEDBR_LAB_ROOT/data/out
//	probe term              run until SIGTERM, then write $FEDBR_LAB_ROOT/marker/term and exit 0
//	probe ignore            write $FEDBR_LAB_ROOT/marker/ignored on SIGTERM and keep running
//	probe flaky             exit 1 on the first run, 0 on the next (counts in $FEDBR_LAB_ROOT/marker)
//	probe serve             serve GET /readyz on 127.0.0.1:$PROBE_PORT: 200 while
//	                        $FEDBR_LAB_ROOT/marker/ready exists, else 503, each answer logged
//	                        ("readyz 503"); then as term
//
// Every run records its pid in $PROBE_PIDS so the test can check no process outlives it.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	root := os.Getenv("FEDBR_LAB_ROOT")
	if d := os.Getenv("PROBE_PIDS"); d != "" {
		_ = os.WriteFile(filepath.Join(d, strconv.Itoa(os.Getpid())), nil, 0o644)
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe exit|report|term|ignore|flaky")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "exit":
		n, _ := strconv.Atoi(os.Args[2])
		fmt.Println("hello from probe")
		fmt.Fprintln(os.Stderr, "exiting with", n)
		os.Exit(n)
	case "report":
		files := false
		for _, a := range os.Args[2:] {
			switch {
			case a == "--":
				files = true
			case files:
				b, err := os.ReadFile(filepath.Join(root, a))
				if err != nil {
					fmt.Printf("file:%s error %v\n", a, err)
					continue
				}
				fmt.Printf("file:%s=%s\n", a, b)
			default:
				fmt.Printf("%s=%s\n", a, os.Getenv(a))
			}
		}
		wd, _ := os.Getwd()
		fmt.Printf("wd=%s\n", wd)
		if err := os.WriteFile(filepath.Join(root, "data", "out"), []byte("written by "+os.Getenv("POD_NAME")), 0o644); err != nil {
			fmt.Println("write data:", err)
			os.Exit(1)
		}
	case "serve":
		ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PROBE_PORT"))
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(1)
		}
		go func() {
			_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				code := http.StatusServiceUnavailable
				if _, err := os.Stat(filepath.Join(root, "marker", "ready")); err == nil {
					code = http.StatusOK
				}
				fmt.Println("readyz", code)
				w.WriteHeader(code)
			}))
		}()
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("waiting for SIGTERM")
		<-c
		os.Exit(0)
	case "term", "ignore":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("waiting for SIGTERM")
		<-c
		if os.Args[1] == "term" {
			_ = os.WriteFile(filepath.Join(root, "marker", "term"), []byte("SIGTERM"), 0o644)
			os.Exit(0)
		}
		_ = os.WriteFile(filepath.Join(root, "marker", "ignored"), []byte("SIGTERM"), 0o644)
		for {
			time.Sleep(time.Hour)
		}
	case "flaky":
		p := filepath.Join(root, "marker", "runs")
		b, _ := os.ReadFile(p)
		runs := len(b)
		_ = os.WriteFile(p, append(b, 'x'), 0o644)
		fmt.Println("run", runs)
		if runs == 0 {
			os.Exit(1)
		}
	default:
		os.Exit(2)
	}
}
