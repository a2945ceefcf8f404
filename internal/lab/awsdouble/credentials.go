package awsdouble

import (
	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// The lab's credentials. The double accepts any signature on EC2, EBS direct, CloudWatch and
// S3; STS's presigned GetCallerIdentity is checked with these (sts.go), as an EKS cluster's
// authenticator has STS check a token. fedbr's production code no longer invents credentials
// when it is pointed at an endpoint: every lab process that calls
// the double is given these explicitly, in its environment (CredentialsEnv, what a node's
// instance role or IRSA would give a pod) or in its SDK configuration (Config).
const (
	AccessKeyID     = "fedbr-lab"
	SecretAccessKey = "fedbr-lab"
)

// CredentialsEnv is the environment that gives a process the lab's credentials through the
// SDK's default chain.
func CredentialsEnv() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + SecretAccessKey}
}

// Config is an SDK configuration for region with the lab's credentials, for lab code that
// builds its clients in process.
func Config(region string) *awssdk.Config {
	return &awssdk.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, "")}
}
