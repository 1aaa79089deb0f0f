package testhook

import (
	"context"
	"slices"
	"testing"
)

// TestStep: a context with a hook reports each step to it; one without
// does nothing, and From says which.
func TestStep(t *testing.T) {
	var got []string
	ctx := With(context.Background(), func(s string) { got = append(got, s) })
	Step(ctx, "a")
	Step(context.Background(), "b")
	From(ctx)("c")
	if From(context.Background()) != nil {
		t.Error("a plain context carries a hook")
	}
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("steps %v", got)
	}
}
