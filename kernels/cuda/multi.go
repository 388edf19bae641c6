//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"strings"

	"pdq/kernels/cuda/host"
)

// Multi is several GPUs served as one kernels.Backend (host.Pool): each call goes to a device
// with a free slot. The backend lives as long as the process or until Close.
type Multi struct {
	*host.Pool
	backs []*Backend
}

// Open opens the devices of ordinals (after CUDA_VISIBLE_DEVICES), or every visible device
// when ordinals is nil, and serves them as one backend.
func Open(ordinals []int) (*Multi, error) {
	n, err := Devices()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, ErrNoDevice
	}
	if ordinals == nil {
		for i := range n {
			ordinals = append(ordinals, i)
		}
	}
	m := &Multi{}
	var ops []host.Ops
	for _, o := range ordinals {
		b, err := New(o)
		if err != nil {
			_ = m.Close()
			return nil, err
		}
		m.backs = append(m.backs, b)
		ops = append(ops, b.Ops)
	}
	if m.Pool, err = host.NewPool(Slots, ops...); err != nil {
		return nil, err
	}
	return m, nil
}

// DeviceName names the GPUs: "NVIDIA H200", "3× NVIDIA H200" or a comma-separated list.
func (m *Multi) DeviceName() string {
	names := make([]string, len(m.backs))
	same := true
	for i, b := range m.backs {
		names[i] = b.DeviceName()
		same = same && names[i] == names[0]
	}
	if same && len(names) > 1 {
		return fmt.Sprintf("%d× %s", len(names), names[0])
	}
	return strings.Join(names, ", ")
}

// Close releases every device.
func (m *Multi) Close() error {
	var errs []error
	for _, b := range m.backs {
		errs = append(errs, b.Close())
	}
	m.backs = nil
	return errors.Join(errs...)
}
