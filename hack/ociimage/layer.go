package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"time"
)

// epoch is the fixed modification time of every tar entry (layer and
// archive), so that identical inputs give identical digests.
var epoch = time.Unix(0, 0).UTC()

// layer is one built image layer.
type layer struct {
	Gzipped []byte // the blob stored in the image
	Tar     []byte // the uncompressed tar; its sha256 is the diff_id
}

// buildLayer writes the entries as a tar owned by root with fixed times,
// then gzips it (gzip's header has no name and a zero mtime).
func buildLayer(entries []entry) (layer, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(e.Path, "/"),
			Mode:    e.Mode,
			ModTime: epoch,
		}
		switch e.Kind {
		case kindDir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case kindFile:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.Data))
		case kindSymlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Link
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return layer{}, err
		}
		if e.Kind == kindFile {
			if _, err := tw.Write(e.Data); err != nil {
				return layer{}, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return layer{}, err
	}

	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return layer{}, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return layer{}, err
	}
	if err := zw.Close(); err != nil {
		return layer{}, err
	}
	return layer{Gzipped: gz.Bytes(), Tar: raw.Bytes()}, nil
}
