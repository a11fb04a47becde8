package envelope_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

func ExampleMake() {
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"order_id": 1042, "note": "<fast> & cheap"},
		envelope.WithQueue("orders"),
		envelope.WithTraceID("7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b"),
		envelope.WithMessageID("f1e2d3c4-b5a6-4789-90ab-cdef01234567"),
		envelope.WithCreatedAt(time.UnixMilli(1749132727000)),
	)
	if err != nil {
		fmt.Println("make:", err)
		return
	}
	body, err := env.Encode()
	if err != nil {
		fmt.Println("encode:", err)
		return
	}
	fmt.Println(string(body))
	// Output:
	// {"job":"urn:babel:orders:created","trace_id":"7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b","data":{"note":"<fast> & cheap","order_id":1042},"meta":{"id":"f1e2d3c4-b5a6-4789-90ab-cdef01234567","queue":"orders","lang":"go","schema_version":1,"created_at":1749132727000},"attempts":0}
}

func ExampleClassify() {
	for _, body := range []string{
		`{"job":"urn:babel:orders:created","trace_id":"t-1","data":{"order_id":1042},"meta":{"schema_version":1},"attempts":2}`,
		`{"JOB":"urn:babel:orders:created","trace_id":"t-1","data":{},"meta":{"schema_version":1}}`,
		`{"job":"urn:babel:orders:created","trace_id":"t-1","data":{},"meta":{"schema_version":1},"attempts":"3"}`,
		`[{"job":"urn:babel:orders:created"}]`,
	} {
		env, err := envelope.Classify([]byte(body))
		var pe *envelope.PoisonError
		switch {
		case errors.As(err, &pe):
			fmt.Printf("poison: rule=%s pointer=%q\n", pe.Rule, pe.Pointer)
		case err != nil:
			fmt.Println("unexpected:", err)
		default:
			fmt.Printf("accepted: %s attempts=%d\n", env.URN(), env.Attempts)
		}
	}
	// Output:
	// accepted: urn:babel:orders:created attempts=2
	// poison: rule=urn pointer="/job"
	// poison: rule=type pointer="/attempts"
	// poison: rule=single_object pointer=""
}

func ExampleEnvelope_Bind() {
	env, err := envelope.Classify([]byte(`{"job":"urn:babel:orders:created","trace_id":"t-1",` +
		`"data":{"order_id":9007199254740993,"total":12.50},"meta":{"schema_version":1}}`))
	if err != nil {
		fmt.Println("classify:", err)
		return
	}
	var order struct {
		OrderID int64       `json:"order_id"`
		Total   json.Number `json:"total"`
	}
	if err := env.Bind(&order); err != nil {
		fmt.Println("bind:", err)
		return
	}
	fmt.Println(order.OrderID, order.Total)
	// Output:
	// 9007199254740993 12.50
}

func ExampleEnvelope_WithAttempts() {
	received := []byte(`{"job":"urn:babel:ledger:posted","trace_id":"t-1","x-tenant":"acme",` +
		`"data":{"id":9007199254740993,"ratio":1.0},"meta":{"schema_version":1,"ts":5},"attempts":2}`)
	env, err := envelope.Classify(received)
	if err != nil {
		fmt.Println("classify:", err)
		return
	}
	for _, w := range env.Warnings() {
		fmt.Println("warning:", w.Pointer)
	}
	retry, err := env.WithAttempts(env.Attempts + 1).Encode()
	if err != nil {
		fmt.Println("encode:", err)
		return
	}
	fmt.Println(string(retry))
	// Output:
	// warning: /meta/ts
	// {"job":"urn:babel:ledger:posted","trace_id":"t-1","data":{"id":9007199254740993,"ratio":1.0},"meta":{"id":"","queue":"","lang":"","schema_version":1,"created_at":0},"attempts":3,"x-tenant":"acme"}
}

func ExampleEnvelope_ToDeadLetter() {
	env, err := envelope.Classify([]byte(`{"job":"urn:babel:orders:created","trace_id":"t-1","data":{},` +
		`"meta":{"id":"m-1","queue":"orders","lang":"php","schema_version":1,"created_at":1}}`))
	if err != nil {
		fmt.Println("classify:", err)
		return
	}
	dl := env.ToDeadLetter(envelope.DeadLetterInfo{
		Reason:   envelope.ReasonFailed,
		Cause:    errors.New("payment gateway timeout"),
		Attempts: 3,
		FailedAt: time.UnixMilli(1749132730000),
	})
	body, err := dl.Encode()
	if err != nil {
		fmt.Println("encode:", err)
		return
	}
	fmt.Println(string(body))
	// Output:
	// {"job":"urn:babel:orders:created","trace_id":"t-1","data":{},"meta":{"id":"m-1","queue":"orders","lang":"php","schema_version":1,"created_at":1},"attempts":3,"dead_letter":{"reason":"failed","error":"payment gateway timeout","exception":"*errors.errorString","failed_at":1749132730000,"original_queue":"orders","attempts":3,"lang":"go"}}
}

func ExamplePoisonCopy() {
	body := []byte("{\"job\":\"\xff\"}")
	_, err := envelope.Classify(body)
	fmt.Println(err)
	dlq, err := envelope.PoisonCopy(body, envelope.DeadLetterInfo{
		Cause:    err,
		Queue:    "orders",
		Attempts: 1,
		FailedAt: time.UnixMilli(1749132730000),
	})
	if err != nil {
		fmt.Println("poison copy:", err)
		return
	}
	fmt.Println(string(dlq))
	// Output:
	// envelope: poison (utf8): payload is not valid UTF-8 (first invalid byte at 8)
	// {"raw":"{\"job\":\"\ufffd\"}","raw_base64":"eyJqb2IiOiL/In0=","dead_letter":{"reason":"poison","error":"envelope: poison (utf8): payload is not valid UTF-8 (first invalid byte at 8)","exception":"*envelope.PoisonError","failed_at":1749132730000,"original_queue":"orders","attempts":1,"lang":"go"}}
}

func ExamplePoisonCopyWithin() {
	body := make([]byte, 1<<20) // 1 MiB of NUL: its full poison copy is over 6 MiB
	const limit = 5 << 20       // the broker's default max message size
	cp, err := envelope.PoisonCopyWithin(body, envelope.DeadLetterInfo{
		Cause: errors.New("not JSON"), Queue: "orders", Attempts: 1, FailedAt: time.UnixMilli(1749132730000),
	}, limit)
	if err != nil {
		fmt.Println("poison copy:", err)
		return
	}
	var c struct {
		Truncated    bool   `json:"truncated"`
		RawSize      int    `json:"raw_size"`
		OriginalSize int    `json:"original_size"`
		SHA256       string `json:"original_sha256"`
	}
	if err := json.Unmarshal(cp, &c); err != nil {
		fmt.Println("unmarshal:", err)
		return
	}
	fmt.Println(len(cp) <= limit, c.Truncated, c.RawSize, c.OriginalSize, c.SHA256[:16])
	// Output:
	// true true 65536 1048576 30e14955ebf13522
}
