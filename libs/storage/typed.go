package storage

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"platform.io/libs/naming"
)

// Unmarshaler is a Protobuf message of k8s.io/api (every built-in kind has Unmarshal).
type Unmarshaler interface {
	Unmarshal([]byte) error
}

// DecodeStored reads a stored built-in object (the Protobuf envelope the gateway writes: the magic
// bytes, then runtime.Unknown{typeMeta, raw}) into into. It does not set the resourceVersion, which
// travels beside the value (storagev1.Object.ResourceVersion).
func DecodeStored(value []byte, into Unmarshaler) error {
	raw, err := envelopeRaw(value)
	if err != nil {
		return err
	}
	return into.Unmarshal(raw)
}

// envelopeRaw returns the raw field of a Protobuf envelope.
func envelopeRaw(value []byte) ([]byte, error) {
	magic := naming.ProtobufMagic
	if !bytes.HasPrefix(value, magic[:]) {
		return nil, errors.New("stored value is not a Protobuf envelope")
	}
	b := value[len(magic):]
	var raw []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("stored envelope: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, fmt.Errorf("stored envelope: %w", protowire.ParseError(m))
			}
			raw = v
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return nil, fmt.Errorf("stored envelope: %w", protowire.ParseError(m))
		}
		b = b[m:]
	}
	if raw == nil {
		return nil, errors.New("stored envelope has no object")
	}
	return raw, nil
}

// Marshaler is a Protobuf message of k8s.io/api (every built-in kind has Marshal).
type Marshaler interface {
	Marshal() ([]byte, error)
}

// EncodeStored builds the stored form of a built-in object, as the gateway writes it: the magic
// bytes, then runtime.Unknown{typeMeta{apiVersion, kind}, raw}. Services that only read objects
// use it in their tests to put objects in storage.
func EncodeStored(apiVersion, kind string, obj Marshaler) ([]byte, error) {
	raw, err := obj.Marshal()
	if err != nil {
		return nil, err
	}
	var typeMeta []byte
	typeMeta = protowire.AppendTag(typeMeta, 1, protowire.BytesType)
	typeMeta = protowire.AppendString(typeMeta, apiVersion)
	typeMeta = protowire.AppendTag(typeMeta, 2, protowire.BytesType)
	typeMeta = protowire.AppendString(typeMeta, kind)
	magic := naming.ProtobufMagic
	out := append([]byte(nil), magic[:]...)
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	out = protowire.AppendBytes(out, typeMeta)
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendBytes(out, raw)
	return out, nil
}
