module github.com/cudadeps/cudadeps

go 1.24

require (
	github.com/ebitengine/purego v0.9.1
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/klauspost/compress v1.19.2
	github.com/opencontainers/go-digest v1.0.0
	github.com/opencontainers/image-spec v1.1.1
	github.com/schollz/progressbar/v3 v3.18.0
	github.com/spf13/cobra v1.10.1
	github.com/spf13/pflag v1.0.9
	github.com/ulikunitz/xz v0.5.15
	go.yaml.in/yaml/v3 v3.0.4
	golang.org/x/crypto v0.32.0
	golang.org/x/sys v0.29.0
	golang.org/x/term v0.28.0
	oras.land/oras-go/v2 v2.6.0
)

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/sync v0.14.0 // indirect
)
