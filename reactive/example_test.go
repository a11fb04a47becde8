package reactive_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

func ExampleToChan() {
	p := reactive.Map(reactive.FromSlice(1, 2, 3), func(v int) (string, error) {
		return "#" + strconv.Itoa(v), nil
	})
	vals, errc := reactive.ToChan(context.Background(), p, 16)
	for v := range vals {
		fmt.Println(v)
	}
	if err := <-errc; err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// #1
	// #2
	// #3
}

func ExampleFlatMap() {
	p := reactive.FlatMap(reactive.FromSlice(1, 2, 3), func(n int) reactive.Publisher[int] {
		vs := make([]int, n)
		for i := range vs {
			vs[i] = n
		}
		return reactive.FromSlice(vs...)
	})
	vals, errc := reactive.ToChan(context.Background(), reactive.Filter(p, func(v int) bool { return v != 2 }), 4)
	for v := range vals {
		fmt.Print(v, " ")
	}
	fmt.Println(<-errc)
	// Output: 1 3 3 3 <nil>
}

func ExampleFromFunc() {
	i := 0
	p := reactive.FromFunc(func(ctx context.Context) (int, error) {
		i++
		if i > 3 {
			return 0, fmt.Errorf("source exhausted after %d: %w", i-1, context.Canceled)
		}
		return i * i, nil
	})
	vals, errc := reactive.ToChan(context.Background(), p, 1)
	for v := range vals {
		fmt.Println(v)
	}
	fmt.Println(<-errc)
	// Output:
	// 1
	// 4
	// 9
	// source exhausted after 3: context canceled
}
