package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	fedaws "github.com/fedbr/fedbr/internal/cloud/aws"
)

// S3Config locates a bucket prefix.
type S3Config struct {
	Region string
	Bucket string
	// Prefix is prepended to every key ("backups/b1/").
	Prefix string
	// Endpoint overrides the S3 endpoint (the lab double); path-style addressing is used then.
	Endpoint string
	// AWS is a pre-loaded SDK configuration; when nil it is loaded from the environment
	// (credentials from the SDK's default chain, Endpoint or not).
	AWS *awssdk.Config
}

// S3 is a Store in an S3 bucket.
type S3 struct {
	client *s3.Client
	bucket string
	prefix string
}

var _ Store = (*S3)(nil)

// NewS3 builds the S3 client.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	ac, err := fedaws.LoadConfig(ctx, cfg.AWS, cfg.Region)
	if err != nil {
		return nil, err
	}
	client := s3.NewFromConfig(ac, func(o *s3.Options) {
		// Objects written without a checksum (older writers, S3-compatible stores) are read
		// without one; the SDK would print a line to stderr for each read.
		o.DisableLogOutputChecksumValidationSkipped = true
		if cfg.Region != "" {
			o.Region = cfg.Region
		}
		if cfg.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
	})
	return &S3{client: client, bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// Put writes data under key.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: awssdk.String(s.bucket), Key: awssdk.String(s.prefix + key), Body: bytes.NewReader(data),
	})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s%s: %w", s.bucket, s.prefix, key, err)
	}
	return nil
}

// Get reads key, at most limit+1 bytes of it.
func (s *S3) Get(ctx context.Context, key string, limit int64) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: awssdk.String(s.bucket), Key: awssdk.String(s.prefix + key)})
	if err != nil {
		var nsk *types.NoSuchKey
		var api smithy.APIError
		if errors.As(err, &nsk) || (errors.As(err, &api) && api.ErrorCode() == "NotFound") {
			return nil, fmt.Errorf("get s3://%s/%s%s: %w", s.bucket, s.prefix, key, ErrNotFound)
		}
		return nil, fmt.Errorf("get s3://%s/%s%s: %w", s.bucket, s.prefix, key, err)
	}
	defer func() { _ = out.Body.Close() }()
	if n := awssdk.ToInt64(out.ContentLength); n > limit {
		return nil, fmt.Errorf("get s3://%s/%s%s: %w: %d bytes, more than %d", s.bucket, s.prefix, key, ErrTooLarge, n, limit)
	}
	b, err := readLimited(out.Body, limit)
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s%s: %w", s.bucket, s.prefix, key, err)
	}
	return b, nil
}

// Delete removes key.
func (s *S3) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: awssdk.String(s.bucket), Key: awssdk.String(s.prefix + key)})
	if err != nil {
		return fmt.Errorf("delete s3://%s/%s%s: %w", s.bucket, s.prefix, key, err)
	}
	return nil
}

// List returns the keys (without the store's prefix) starting with prefix.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	pager := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: awssdk.String(s.bucket), Prefix: awssdk.String(s.prefix + prefix)})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s%s: %w", s.bucket, s.prefix, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, strings.TrimPrefix(awssdk.ToString(o.Key), s.prefix))
		}
	}
	sort.Strings(keys)
	return keys, nil
}
