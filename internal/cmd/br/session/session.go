// Package session turns the flags every `fedbr br` command shares — where the backup's
// metadata is stored and which AWS account-region (or lab double) to call — into a metadata
// store and a cloud provider, so each command parses and validates them the same way.
package session

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/meta"
)

// Flags are the shared flags.
type Flags struct {
	Storage  string
	Region   string
	Endpoint string
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Storage, "storage", "s", "", "the backup's storage prefix: s3://BUCKET/PREFIX[?region=REGION] (the bucket's region, default --region), or a local directory (path or file:///path) for the lab (required)")
	fs.StringVar(&f.Region, "region", "", "AWS region of EC2, EBS and (unless --storage names one) S3 (default: from the AWS environment)")
	fs.StringVar(&f.Endpoint, "aws-endpoint", "", "endpoint override for every AWS service, e.g. the lab's AWS double http://127.0.0.1:4566")
}

// Validate checks the flags without any I/O.
func (f *Flags) Validate() error {
	if _, err := f.location(); err != nil {
		return err
	}
	return f.ValidateEndpoint()
}

// ValidateEndpoint checks --aws-endpoint alone (for a command whose storage is optional).
func (f *Flags) ValidateEndpoint() error {
	if f.Endpoint != "" {
		u, err := url.Parse(f.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--aws-endpoint %q: want an http(s) URL", f.Endpoint)
		}
	}
	return nil
}

type location struct {
	bucket, prefix, dir string
	// region is the bucket's (?region= of an s3:// storage); empty: --region.
	region string
}

// regionPattern is an AWS region name (us-west-2, us-gov-east-1, cn-north-1).
var regionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

func (f *Flags) location() (location, error) {
	s := f.Storage
	switch {
	case s == "":
		return location{}, fmt.Errorf("--storage is required")
	case strings.HasPrefix(s, "s3://"):
		loc, query, _ := strings.Cut(strings.TrimPrefix(s, "s3://"), "?")
		bucket, prefix, _ := strings.Cut(loc, "/")
		if bucket == "" {
			return location{}, fmt.Errorf("--storage %q: want s3://BUCKET/PREFIX[?region=REGION]", s)
		}
		prefix = strings.Trim(prefix, "/")
		if prefix != "" {
			prefix += "/"
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			return location{}, fmt.Errorf("--storage %q: %w", s, err)
		}
		out := location{bucket: bucket, prefix: prefix, region: q.Get("region")}
		for k, v := range q {
			switch {
			case k != "region":
				return location{}, fmt.Errorf("--storage %q: option %q is not supported (only region)", s, k)
			case len(v) != 1 || !regionPattern.MatchString(v[0]):
				return location{}, fmt.Errorf("--storage %q: region %q is not an AWS region name", s, strings.Join(v, ","))
			}
		}
		return out, nil
	case strings.HasPrefix(s, "file://"):
		u, err := url.Parse(s)
		if err != nil || u.Path == "" || (u.Host != "" && u.Host != "localhost") {
			return location{}, fmt.Errorf("--storage %q: want file:///ABSOLUTE/PATH", s)
		}
		return location{dir: u.Path}, nil
	case strings.Contains(s, "://"):
		return location{}, fmt.Errorf("--storage %q: only s3:// and local directories are supported", s)
	}
	return location{dir: filepath.Clean(s)}, nil
}

// Store opens the backup's metadata store.
func (f *Flags) Store(ctx context.Context) (*meta.Store, error) {
	loc, err := f.location()
	if err != nil {
		return nil, err
	}
	var b blob.Store
	if loc.dir != "" {
		if b, err = blob.NewDir(loc.dir); err != nil {
			return nil, err
		}
	} else if b, err = blob.NewS3(ctx, blob.S3Config{Region: cmp.Or(loc.region, f.Region), Bucket: loc.bucket, Prefix: loc.prefix, Endpoint: f.Endpoint}); err != nil {
		return nil, err
	}
	return meta.NewStore(b, nil), nil
}

// Provider opens the AWS provider.
func (f *Flags) Provider(ctx context.Context) (*aws.Provider, error) {
	return aws.New(ctx, aws.Config{Region: f.Region, Endpoint: f.Endpoint})
}

// Clients are what a step opens from the shared flags.
type Clients struct {
	Store    *meta.Store
	Provider *aws.Provider
}

// Open opens the backup's metadata store and the AWS provider.
func (f *Flags) Open(ctx context.Context) (Clients, error) {
	store, err := f.Store(ctx)
	if err != nil {
		return Clients{}, err
	}
	p, err := f.Provider(ctx)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Store: store, Provider: p}, nil
}
