package localaws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/Admiral-Piett/goaws/app/gosqs"
	"github.com/Admiral-Piett/goaws/app/models"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/sirupsen/logrus"
	minidyn "github.com/truora/minidyn/server"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
)

// Server is one embedded API server.
type Server struct {
	URL  string
	srv  *http.Server
	done chan struct{}
}

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}

func serve(addr string, h http.Handler) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logrus.WithError(err).Error("embedded server stopped")
		}
	}()
	return s, nil
}

// StartDynamoDB starts an embedded DynamoDB-API server on addr
// ("127.0.0.1:0" for any free port). Each server has its own tables. It
// refuses items over DynamoDB's 400 KB (see MaxItemBytes) and honours
// TransactWriteItems' ClientRequestToken as the service does, which the
// emulator alone does not.
func StartDynamoDB(addr string) (*Server, error) {
	return StartDynamoDBWith(addr, DynamoDBOptions{})
}

// DynamoDBOptions make an embedded DynamoDB-API server model DynamoDB's
// capacity and index propagation, for benchmarks and tests of the key
// design.
type DynamoDBOptions struct {
	// Capacity, when set, accounts every request's read and write units
	// per partition key per second (see Capacity).
	Capacity *Capacity
	// IndexLag delays what queries of a global secondary index see: they
	// answer from the table as it was IndexLag ago, as a DynamoDB index
	// that has not caught up yet does. Reads of the table itself are
	// current.
	IndexLag time.Duration
	// Now is the clock of the capacity model's seconds, the index lag and
	// the transaction tokens' window (default: the wall clock).
	Now func() time.Time
}

// StartDynamoDBWith starts an embedded DynamoDB-API server as StartDynamoDB
// does, with a capacity model and an index lag.
func StartDynamoDBWith(addr string, o DynamoDBOptions) (*Server, error) {
	return serve(addr, &guard{next: &describeFence{next: minidyn.NewServer()}, model: o.Capacity, lag: o.IndexLag, now: o.Now})
}

// StartS3 starts an embedded S3-API server (in memory) on addr. Presigned
// URLs made for it work with any HTTP client, as they do against S3.
func StartS3(addr string) (*Server, error) {
	return serve(addr, gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
}

var (
	sqsOnce   sync.Once
	sqsServer *Server
	sqsErr    error
)

// SharedSQS starts the process's embedded SQS-API server on first use and
// returns it. The SQS emulation keeps its queues in package-level state, so
// one process has one; give each user its own queue names. Queues may be
// created and deleted while others are used (sqsGuard).
func SharedSQS(addr string) (*Server, error) {
	sqsOnce.Do(func() {
		logrus.SetLevel(logrus.ErrorLevel)
		ln, err := net.Listen("tcp", orLoopback(addr))
		if err != nil {
			sqsErr = fmt.Errorf("listen for SQS: %w", err)
			return
		}
		host, port, _ := net.SplitHostPort(ln.Addr().String())
		models.CurrentEnvironment = models.Environment{
			Host: host, Port: port, Region: "", AccountID: "000000000000", QueueAttributeDefaults: models.EnvQueueAttributes{
				VisibilityTimeout: 30, ReceiveMessageWaitTimeSeconds: 0, MaximumMessageSize: 262144,
			},
		}
		models.BaseXmlns = "http://queue.amazonaws.com/doc/2012-11-05/"
		go gosqs.PeriodicTasks(250*time.Millisecond, make(chan bool))
		s := &Server{URL: "http://" + net.JoinHostPort(host, port), srv: &http.Server{Handler: &sqsGuard{next: router.New()}, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
		go func() {
			defer close(s.done)
			_ = s.srv.Serve(ln)
		}()
		sqsServer = s
	})
	return sqsServer, sqsErr
}

func orLoopback(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

// Config is the SDK configuration for a local endpoint: static credentials
// ("local"), us-east-1, and the endpoint as the client's base endpoint. A
// client of any local server is built from it with its service's own
// constructor (ec2.NewFromConfig(localaws.Config(url)); S3 also wants
// path-style addressing, as bucket names are not host names on loopback),
// so that localaws imports no service package of the SDK but the two its
// own helpers need, and a test binary links only the ones its tests use.
// The SDK's retryer is the default unless the options say otherwise.
func Config(endpoint string) aws.Config {
	cfg := awsenv.Static("")
	cfg.BaseEndpoint = aws.String(endpoint)
	return cfg
}

// DynamoDBClient returns a real SDK client for a local endpoint, retrying as
// the functions' clients do (awsenv.Retries) unless optFns say otherwise.
func DynamoDBClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(Config(endpoint), append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.Retryer = awsenv.Retryer(awsenv.DynamoDB)
	}}, optFns...)...)
}

// SQSClient returns a real SDK client for a local endpoint, retrying as the
// functions' clients do (awsenv.Retries) unless optFns say otherwise.
func SQSClient(endpoint string, optFns ...func(*sqs.Options)) *sqs.Client {
	return sqs.NewFromConfig(Config(endpoint), append([]func(*sqs.Options){func(o *sqs.Options) {
		o.Retryer = awsenv.Retryer(awsenv.SQS)
	}}, optFns...)...)
}

// QueueURL returns the URL the local SQS server gives a queue name.
func QueueURL(s *Server, name string) string {
	return s.URL + "/" + models.CurrentEnvironment.AccountID + "/" + name
}
