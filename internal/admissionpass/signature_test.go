package admissionpass

import (
	"bytes"
	"encoding/asn1"
	"math/big"
	"testing"
)

func TestJWSSignature(t *testing.T) {
	der := func(r, s *big.Int) []byte {
		b, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	max256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	pad := func(tail ...byte) []byte { return append(make([]byte, 32-len(tail)), tail...) }
	tests := []struct {
		name string
		der  []byte
		want []byte // nil: an error
	}{
		{"Short", der(big.NewInt(1), big.NewInt(2)), append(pad(1), pad(2)...)},
		{"Full", der(max256, big.NewInt(0x0102)), append(bytes.Repeat([]byte{0xff}, 32), pad(1, 2)...)},
		{"TooLong", der(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)), nil},
		{"Zero", der(big.NewInt(0), big.NewInt(1)), nil},
		{"Negative", der(big.NewInt(-1), big.NewInt(1)), nil},
		{"Trailing", append(der(big.NewInt(1), big.NewInt(2)), 0), nil},
		{"NotDER", []byte{1, 2, 3}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jwsSignature(tt.der)
			if tt.want == nil {
				if err == nil {
					t.Errorf("converted %x", tt.der)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Errorf("got %x, %v; want %x", got, err, tt.want)
			}
		})
	}
}
