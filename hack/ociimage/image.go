package main

import (
	"archive/tar"
	_ "crypto/sha256" // registers sha256 for go-digest
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// annotationImageName is the annotation containerd's importer reads to name
// the image it registers (images.AnnotationImageName in containerd).
const annotationImageName = "io.containerd.image.name"

// blob is one content-addressed file of the layout.
type blob struct {
	Desc ocispec.Descriptor
	Data []byte
}

func newBlob(mediaType string, data []byte) blob {
	return blob{
		Desc: ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))},
		Data: data,
	}
}

func jsonBlob(mediaType string, v any) (blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return blob{}, err
	}
	return newBlob(mediaType, data), nil
}

// build writes the OCI image-layout archive described by opts to w.
func build(w io.Writer, opts options) error {
	tag, err := tagOf(opts.Name)
	if err != nil {
		return err
	}
	fs, err := collect(opts)
	if err != nil {
		return err
	}
	l, err := buildLayer(fs.sorted())
	if err != nil {
		return err
	}
	layerBlob := newBlob(ocispec.MediaTypeImageLayerGzip, l.Gzipped)

	platform := ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH}
	created := epoch
	config, err := jsonBlob(ocispec.MediaTypeImageConfig, ocispec.Image{
		Created:  &created,
		Platform: platform,
		Config: ocispec.ImageConfig{
			Entrypoint: opts.Entrypoint,
			Cmd:        opts.Cmd,
			Env:        withDefaultPath(opts.Env),
			WorkingDir: opts.Workdir,
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(l.Tar)}},
	})
	if err != nil {
		return err
	}
	manifest, err := jsonBlob(ocispec.MediaTypeImageManifest, ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    config.Desc,
		Layers:    []ocispec.Descriptor{layerBlob.Desc},
	})
	if err != nil {
		return err
	}

	// The index names the manifest twice: containerd's importer registers
	// io.containerd.image.name as is; the OCI ref name is the tag, for other
	// tools reading the layout.
	mdesc := manifest.Desc
	mdesc.Platform = &platform
	mdesc.Annotations = map[string]string{
		annotationImageName:       opts.Name,
		ocispec.AnnotationRefName: tag,
	}
	index, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{mdesc},
	})
	if err != nil {
		return err
	}
	layout, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return err
	}

	return writeLayout(w, layout, index, []blob{layerBlob, config, manifest})
}

// writeLayout writes oci-layout, index.json and blobs/sha256/* as a tar.
func writeLayout(w io.Writer, layout, index []byte, blobs []blob) error {
	tw := tar.NewWriter(w)
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: epoch})
	}
	file := func(name string, data []byte) error {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}

	if err := file(ocispec.ImageLayoutFile, layout); err != nil {
		return err
	}
	if err := file(ocispec.ImageIndexFile, index); err != nil {
		return err
	}
	if err := dir(ocispec.ImageBlobsDir + "/"); err != nil {
		return err
	}
	if err := dir(ocispec.ImageBlobsDir + "/sha256/"); err != nil {
		return err
	}
	for _, b := range blobs {
		name := fmt.Sprintf("%s/%s/%s", ocispec.ImageBlobsDir, b.Desc.Digest.Algorithm(), b.Desc.Digest.Encoded())
		if err := file(name, b.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// tagOf returns the tag of a full image name such as skiff.local/busybox:1.35.
// A name without a tag is refused rather than silently tagged latest, and so
// is a digest reference: the index must carry the exact name to register.
func tagOf(name string) (string, error) {
	i := strings.LastIndex(name, ":")
	if i < 0 || strings.Contains(name[i+1:], "/") || strings.Contains(name, "@") || i == len(name)-1 {
		return "", fmt.Errorf("--name %q: want a full name with a tag, e.g. skiff.local/busybox:1.35", name)
	}
	return name[i+1:], nil
}

// withDefaultPath prepends the usual PATH unless the caller set one, as
// Docker-built images do: the runtime does not invent a PATH for exec.
func withDefaultPath(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return env
		}
	}
	return append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
}
