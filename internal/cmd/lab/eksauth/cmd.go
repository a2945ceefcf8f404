// Package eksauth is the `fedbr-lab lab eksauth` command: it serves the lab's EKS token
// authenticator (package eksauth) over HTTPS until interrupted, for one cluster's
// kube-apiserver to call as its token webhook.
package eksauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/eksauth"
)

type options struct {
	listen    string
	cert, key string
	auth      eksauth.Options
	maps      []string
}

// NewCmd returns the `lab eksauth` command.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "eksauth --cluster NAME --sts-endpoint URL --cert FILE --key FILE --map ARN=USER[:GROUPS]",
		Short: "Serve an EKS token authenticator (a TokenReview webhook) for one lab cluster",
		Long: `Serve the lab's stand-in for an EKS cluster's token authenticator: kube-apiserver's token
webhook (authentication.k8s.io/v1 TokenReview, POST ` + eksauth.Path + `) over HTTPS. A token
("k8s-aws-v1." + a presigned STS GetCallerIdentity URL) is checked as aws-iam-authenticator
checks it, replayed to --sts-endpoint (the AWS double) with --cluster as its x-k8s-aws-id
header, and the ARN STS answers is mapped to a user by --map (aws-auth's mapUsers/mapRoles).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to serve on")
	f.StringVar(&o.cert, "cert", "", "serving certificate (PEM)")
	f.StringVar(&o.key, "key", "", "serving key (PEM)")
	f.StringVar(&o.auth.Cluster, "cluster", "", "the cluster's name: the x-k8s-aws-id tokens are signed for")
	f.StringVar(&o.auth.STSEndpoint, "sts-endpoint", "", "where tokens are replayed (the AWS double, http://ADDR); the token's host is sent as Host")
	f.StringArrayVar(&o.maps, "map", nil, "ARN=USERNAME[:GROUP,GROUP…]: an IAM user's or role's ARN and the Kubernetes user it is (repeatable)")
	for _, name := range []string{"cert", "key", "cluster", "sts-endpoint"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func (o *options) run(cmd *cobra.Command) error {
	for _, m := range o.maps {
		mp, err := eksauth.ParseMapping(m)
		if err != nil {
			return fmt.Errorf("--map: %w", err)
		}
		o.auth.Mappings = append(o.auth.Mappings, mp)
	}
	auth, err := eksauth.New(o.auth)
	if err != nil {
		return err
	}
	tlsCfg, err := eksauth.Files{Cert: o.cert, Key: o.key}.TLS()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: auth, TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.ServeTLS(ln, "", "") }()
	_, _ = fmt.Fprintf(cmd.OutOrStdout(), "EKS authenticator of cluster %s serving on https://%s%s (STS %s, %d mappings)\n",
		o.auth.Cluster, ln.Addr(), eksauth.Path, o.auth.STSEndpoint, len(o.auth.Mappings))
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdownCtx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
