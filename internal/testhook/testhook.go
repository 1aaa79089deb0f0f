// Package testhook lets a test stop a process at a named step of a change to disk, to kill it there and prove that the next run recovers; outside tests no context carries a hook and Step does nothing.
package testhook

import "context"

type key struct{}

// With returns ctx carrying hook, which Step calls.
func With(ctx context.Context, hook func(step string)) context.Context {
	return context.WithValue(ctx, key{}, hook)
}

// Step tells the hook ctx carries, if any, that the named step is done.
func Step(ctx context.Context, name string) {
	if hook, ok := ctx.Value(key{}).(func(string)); ok && hook != nil {
		hook(name)
	}
}

// From is the hook ctx carries, or nil: for code that holds no context at
// each step.
func From(ctx context.Context) func(step string) {
	hook, _ := ctx.Value(key{}).(func(string))
	return hook
}
