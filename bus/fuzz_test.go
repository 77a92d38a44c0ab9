package bus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// chunkRefusal is how assembly.add names a chunk it refuses: the envelope
// version, the header at fault, or the chunk.
var chunkRefusal = regexp.MustCompile(`^(envelope version "|bad Hacrl-(Chunk|Size|Offset) header|chunk -?\d+/\d+ )`)

// FuzzAssembly publishes a payload as chunks the way Publish does (chunks
// of 1 to 64 bytes), delivers them in any order with repeats, and slips in
// one forged message: chunk 0's headers with any header lines laid over
// them and any body. Whatever arrives, the assembly never holds more than
// the bytes it was sent (plus one payload's worth once verified); a forged
// message is refused naming its header or chunk, or taken; and a payload
// that completes and verifies is byte for byte the one published, unless
// the forged message made its own payload whose checksum it carries. When
// the forged message changes nothing, the published payload always comes
// out. The seeds are real step payloads' shapes: a gob-like binary body, a
// JSON body, and an empty one.
func FuzzAssembly(f *testing.F) {
	f.Add([]byte("\x1f\xff\x81\x03\x01\x01\x0bstepPayload\x01\xff\x82\x00\x01\x06\x01\x07Version\x01\x04\x00"), uint8(7), []byte{2, 0, 1, 1}, uint8(1), "Hacrl-Offset: 3", []byte("xyz"))
	f.Add([]byte(`{"agent":"a","rollouts":[{"text":"47","reward":1}]}`), uint8(15), []byte{3, 3, 0}, uint8(0), "Hacrl-Chunk: 0/1\nHacrl-Size: 9223372036854775807", []byte{})
	f.Add([]byte{}, uint8(0), []byte{}, uint8(2), "Hacrl-Offset: 9223372036854775807", []byte("a"))
	f.Add([]byte("0123456789"), uint8(2), []byte{1}, uint8(5), "Hacrl-Bus: 2", []byte("0"))
	f.Fuzz(func(t *testing.T, payload []byte, chunk uint8, order []byte, at uint8, forged string, body []byte) {
		r := &Run{id: "fuzz", chunk: int(chunk)%64 + 1}
		n := max((len(payload)+r.chunk-1)/r.chunk, 1)
		sum := sha256.Sum256(payload)
		msgs := make([]*nats.Msg, n)
		for i := range msgs {
			msgs[i] = r.chunkMsg(0, "a", payload, sum, i, n)
		}
		var seq []*nats.Msg
		for _, b := range order {
			seq = append(seq, msgs[int(b)%n])
		}
		seq = append(seq, msgs...) // every chunk arrives at least once
		fake := nats.NewMsg(msgs[0].Subject)
		for k, v := range msgs[0].Header {
			fake.Header[k] = append([]string(nil), v...)
		}
		for _, line := range strings.Split(forged, "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok {
				fake.Header.Set(k, v)
			}
		}
		fake.Data = body
		same := bytes.Equal(body, msgs[0].Data) && equalHeaders(fake.Header, msgs[0].Header)
		pos := int(at) % (len(seq) + 1)
		seq = append(seq[:pos], append([]*nats.Msg{fake}, seq[pos:]...)...)

		var as assembly
		sent := 0
		tookFake := false
		for _, m := range seq {
			sent += len(m.Data)
			err := as.add(m.Header, m.Data)
			if held := as.held; held > sent {
				t.Fatalf("the assembly holds %d bytes after %d were sent", held, sent)
			}
			if err != nil {
				if !chunkRefusal.MatchString(err.Error()) {
					t.Fatalf("refusal names no header or chunk: %v", err)
				}
				if m != fake && (!tookFake || same) {
					t.Fatalf("a published chunk refused: %v", err)
				}
				continue
			}
			tookFake = tookFake || m == fake
		}
		if !as.done() {
			if !tookFake || same {
				t.Fatalf("every chunk sent, the assembly has %d of %d", as.got, as.n)
			}
			return
		}
		err := as.verify()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "payload of ") {
				t.Fatalf("a failed check names no payload: %v", err)
			}
			if !tookFake || same {
				t.Fatalf("the published chunks fail to verify: %v", err)
			}
			return
		}
		if held := as.held; held > sent+len(as.buf) {
			t.Fatalf("the verified assembly holds %d bytes after %d were sent", held, sent)
		}
		got := sha256.Sum256(as.buf)
		if hex.EncodeToString(got[:]) != as.sum {
			t.Fatal("verify passed a payload that does not match its checksum")
		}
		if as.sum == hex.EncodeToString(sum[:]) && !bytes.Equal(as.buf, payload) {
			t.Fatalf("assembled %q, published %q", as.buf, payload)
		}
	})
}

func equalHeaders(a, b nats.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}
