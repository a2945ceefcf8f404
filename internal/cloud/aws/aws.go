// Package aws implements cloud.Provider on aws-sdk-go-v2 (EC2, EBS direct, CloudWatch).
//
// Every EC2 and EBS direct attempt, retries included, first takes a token from the shared
// per account-region budget (package budget), so fedbr stays inside AWS's limits instead of
// retrying into throttling; the SDK's adaptive retry mode handles the throttling that still
// happens (other tenants of the account), and the provider itself retries errors that
// cloud.IsRetryable calls transient, such as PendingSnapshotLimitExceeded, until the context
// ends. Config.Endpoint points every client at the lab's AWS double.
package aws

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/ebs"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go/middleware"

	"github.com/fedbr/fedbr/internal/backoff"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/budget"
)

// Config configures the provider. Zero fields take defaults.
type Config struct {
	// Region is the AWS region.
	Region string
	// Endpoint overrides the endpoint of every service (the lab's AWS double); empty means
	// AWS's own endpoints.
	Endpoint string
	// Account names the account in the budget key; default "default".
	Account string
	// Limits are the client-side budgets; default budget.ClientLimits().
	Limits *budget.Limits
	// Budget, when set, is used instead of the process-wide budget of Account/Region.
	Budget *budget.Budget
	// PollInterval is the longest interval between a wait's polls (they start at 500 ms and
	// double; a snapshot wait's are shortened to the time its progress says is left); default 5s.
	PollInterval time.Duration
	// MaxAttempts is the SDK's attempts per call; default 10.
	MaxAttempts int
	// MaxBackoff caps the SDK's and the provider's backoff; default 20s.
	MaxBackoff time.Duration
	// RetryMode is the SDK retry mode: "adaptive" (default) slows the client down after
	// throttling, with a floor of 0.5 attempts/s per client; "standard" only backs off per
	// call and leaves pacing to the budget.
	RetryMode string
	// Concurrency bounds parallel calls of bulk operations; default 16.
	Concurrency int
	// ConsistencyWindow is how long after its creation a snapshot or volume that AWS reports
	// missing may just not be visible yet (EC2 is eventually consistent), and how long a wait
	// tolerates a missing resource from its start; default 2m.
	ConsistencyWindow time.Duration
	// AWS is a pre-loaded SDK configuration (credentials, HTTP client); when nil it is loaded
	// from the environment (LoadConfig), Endpoint or not.
	AWS *awssdk.Config
}

// Provider is the AWS implementation of cloud.Provider.
type Provider struct {
	cfg    Config
	aws    awssdk.Config // the loaded SDK configuration, region set
	ec2    *ec2.Client
	ebs    *ebs.Client
	cw     *cloudwatch.Client
	budget *budget.Budget
	fresh  *freshness
}

var _ cloud.Provider = (*Provider)(nil)

// New builds the provider's SDK clients.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Account == "" {
		cfg.Account = "default"
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 20 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.ConsistencyWindow <= 0 {
		cfg.ConsistencyWindow = defaultConsistencyWindow
	}
	limits := budget.ClientLimits()
	if cfg.Limits != nil {
		limits = *cfg.Limits
	}
	b := cfg.Budget
	if b == nil {
		b = budget.Shared(cfg.Account+"/"+cfg.Region, limits)
	}
	ac, err := LoadConfig(ctx, cfg.AWS, cfg.Region)
	if err != nil {
		return nil, err
	}
	if cfg.Region != "" {
		ac.Region = cfg.Region
	}
	maxAttempts, maxBackoff := cfg.MaxAttempts, cfg.MaxBackoff
	standard := func(so *retry.StandardOptions) {
		so.MaxAttempts = maxAttempts
		so.MaxBackoff = maxBackoff
		// The budget, not the SDK's retry quota, decides how fast fedbr calls; a throttling
		// storm must slow fedbr down, not fail it.
		so.RateLimiter = ratelimit.None
	}
	switch cfg.RetryMode {
	case "", "adaptive":
		ac.Retryer = func() awssdk.Retryer {
			return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
				o.StandardOptions = append(o.StandardOptions, standard)
			})
		}
	case "standard":
		ac.Retryer = func() awssdk.Retryer { return retry.NewStandard(standard) }
	default:
		return nil, fmt.Errorf("unknown retry mode %q (want adaptive or standard)", cfg.RetryMode)
	}
	p := &Provider{cfg: cfg, aws: ac, budget: b, fresh: newFreshness(cfg.ConsistencyWindow)}
	p.ec2 = ec2.NewFromConfig(ac, func(o *ec2.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(cfg.Endpoint)
		}
		o.APIOptions = append(o.APIOptions, p.budgetMiddleware("ec2"))
	})
	p.ebs = ebs.NewFromConfig(ac, func(o *ebs.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(cfg.Endpoint)
		}
		o.APIOptions = append(o.APIOptions, p.budgetMiddleware("ebs"))
	})
	p.cw = cloudwatch.NewFromConfig(ac, func(o *cloudwatch.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(cfg.Endpoint)
		}
	})
	return p, nil
}

// Budget is the call budget the provider draws from.
func (p *Provider) Budget() *budget.Budget { return p.budget }

// budgetMiddleware takes a budget token before every attempt (it sits after the SDK's retry
// middleware), so retries are paced by the budget too.
func (p *Provider) budgetMiddleware(service string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("fedbrBudget",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				var err error
				if service == "ebs" {
					err = p.budget.EBS(ctx)
				} else {
					err = p.budget.EC2(ctx, middleware.GetOperationName(ctx))
				}
				if err != nil {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, err
				}
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

// outerRetries bounds the provider's own retries of transient errors other than throttling
// and quotas (server faults that outlived the SDK's attempts).
const outerRetries = 5

// retry runs call until it succeeds, fails with an error cloud.IsRetryable rejects, or ctx
// ends. The SDK already retried each call; this outer loop covers quota errors the SDK does
// not retry (PendingSnapshotLimitExceeded) and throttling storms longer than the SDK's
// attempts, for as long as ctx allows, and other transient errors a few more times.
func (p *Provider) retry(ctx context.Context, call func() error) error {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil || !cloud.IsRetryable(err) || ctx.Err() != nil {
			return err
		}
		if !cloud.IsThrottling(err) && !cloud.IsQuotaWait(err) && attempt > outerRetries {
			return err
		}
		d := time.Duration(rand.Int64N(int64(backoff))) + backoff/2 //nolint:gosec // G404: retry jitter, not a secret
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(d):
		}
		backoff = min(2*backoff, p.cfg.MaxBackoff)
	}
}

// sleep waits for d or ctx.
// firstPoll is a wait's first interval; it doubles up to Config.PollInterval.
const firstPoll = 500 * time.Millisecond

// poller paces a wait's describe calls: from firstPoll, doubling up to the configured
// interval. A wait that ends in seconds (a volume from a snapshot, a small snapshot) ends close
// to when the state changed, instead of up to a whole interval later on the restore's or the
// backup's path; a long one costs a handful of calls more than a fixed interval.
type poller struct {
	n     int
	max   time.Duration
	start time.Time
}

func (p *Provider) poller() *poller { return &poller{max: p.cfg.PollInterval, start: time.Now()} }

// wait sleeps the next interval.
func (w *poller) wait(ctx context.Context) error {
	w.n++
	return sleep(ctx, backoff.Doubling(firstPoll, w.max, w.n))
}

// waitProgress sleeps the next interval of a wait whose progress is known (percent of the work
// done since the wait began): no longer than pollInterval's estimate of the time left.
func (w *poller) waitProgress(ctx context.Context, percent float64) error {
	w.n++
	return sleep(ctx, pollInterval(w.n, w.max, time.Since(w.start), percent))
}

// pollInterval is the interval before poll n+1 of a wait that has run for elapsed and done
// percent of its work: the doubling interval, shortened to the time left at the rate so far, so
// the poll after the work ends comes soon after it (a snapshot completing 1 s after a poll is
// seen then, not at the next doubled interval 4 s later). It is never shorter than firstPoll or a
// tenth of elapsed, so a wait stuck near 100 % costs no more calls than the doubling's first
// ones: waits of minutes poll at the configured interval as before. Without progress (0 or
// unknown) it is the doubling interval.
func pollInterval(n int, ceiling, elapsed time.Duration, percent float64) time.Duration {
	d := backoff.Doubling(firstPoll, ceiling, n)
	if percent <= 0 || percent >= 100 || elapsed <= 0 {
		return d
	}
	left := time.Duration(float64(elapsed) * (100 - percent) / percent)
	return min(d, max(left, firstPoll, elapsed/10))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// forEach runs fn for every item with at most n in flight and returns the errors joined.
func forEach[T any](ctx context.Context, n int, items []T, fn func(context.Context, T) error) error {
	errs := make([]error, len(items))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, it := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = fn(ctx, it)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func tagMap[T any](tags []T, kv func(T) (string, string)) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		k, v := kv(t)
		m[k] = v
	}
	return m
}

// LoadConfig returns base (copied) or else the SDK's configuration for region from the process's
// environment only: credentials from the SDK's chain without its files (static keys in the
// environment, web identity as IRSA injects it, container credentials as EKS Pod Identity
// injects them, or the instance metadata service, which kube2iam answers). The shared config and
// credentials files (~/.aws/config, ~/.aws/credentials) are never read: where a pod's HOME or
// files could be chosen by whoever wrote its template, such a file could send the web identity
// token to another STS endpoint (services, endpoint_url), assume another role or run a
// credential_process; the environment is the agent's and the operator's alone (the agent's
// policy refuses AWS_ and HOME in a template, docs/security.md). An endpoint override only says
// where the calls go; a process that talks to the lab's AWS double is given the double's
// credentials explicitly (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in its environment, or
// base), never by the mere presence of an endpoint.
func LoadConfig(ctx context.Context, base *awssdk.Config, region string) (awssdk.Config, error) {
	if base != nil {
		return base.Copy(), nil
	}
	ac, err := config.LoadDefaultConfig(ctx, config.WithRegion(region),
		// Empty, not nil: nil would mean the default files.
		config.WithSharedConfigFiles([]string{}), config.WithSharedCredentialsFiles([]string{}))
	if err != nil {
		return awssdk.Config{}, fmt.Errorf("load AWS config for region %s: %w", region, err)
	}
	return ac, nil
}

// pager is what every EC2 paginator offers.
type pager[T any] interface {
	HasMorePages() bool
	NextPage(context.Context, ...func(*ec2.Options)) (T, error)
}

// eachPage fetches every page of pg through the provider's retry loop and hands it to each.
func eachPage[T any](ctx context.Context, p *Provider, pg pager[T], each func(T)) error {
	for pg.HasMorePages() {
		var page T
		err := p.retry(ctx, func() error {
			var err error
			page, err = pg.NextPage(ctx)
			return err
		})
		if err != nil {
			return err
		}
		each(page)
	}
	return nil
}
