#!/bin/sh
# What each candidate registry client adds to cudadeps' module: requirement
# graph edges (go mod graph), modules in the build list (go list -m all),
# and the go line the library itself declares (the least ours can be). Run
# from the repository; needs the module proxy. The baseline is cudadeps'
# go.mod without oras-go.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

measure() { # DIR LABEL [MODULE@VERSION]
	goline=""
	if [ -n "${3:-}" ]; then
		gomod=$(cd "$1" && go mod download -json "$3" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
		goline="its $(grep -m1 '^go ' "$gomod")"
	fi
	(cd "$1" && printf '%-52s %4s edges %4s modules  %s\n' "$2" \
		"$(go mod graph | wc -l)" "$(go list -m all | wc -l)" "$goline")
}

mkdir "$work/base"
cp "$root/go.mod" "$root/go.sum" "$work/base/"
(cd "$work/base" && go mod edit -module example.com/base \
	-droprequire oras.land/oras-go/v2 -droprequire github.com/opencontainers/image-spec \
	-droprequire github.com/opencontainers/go-digest -droprequire golang.org/x/sync)
measure "$work/base" "cudadeps without a registry client"

for lib in oras.land/oras-go/v2@v2.6.0 github.com/google/go-containerregistry@v0.20.7 github.com/containerd/containerd/v2@v2.1.4; do
	d="$work/$(echo "$lib" | tr '/@' '__')"
	cp -r "$work/base" "$d"
	(cd "$d" && go get "$lib" >/dev/null 2>&1)
	measure "$d" "+ $lib" "$lib"
done
