package store

// A store is a stack of layers over a backend (Checked, metering,
// fencing, authentication, encryption, ...). Every layer that wraps
// another Store says which one with Unwrap, so that a caller finds a
// layer by its type wherever it sits in the stack (As), and a layer
// inserted between two others cannot make such a lookup stop early.
type Layer interface {
	Store
	// Unwrap returns the store this layer wraps.
	Unwrap() Store
}

// As finds the first layer of type T in s's stack, from the top: s
// itself, then what each layer unwraps to. Use it instead of a type
// assertion on a concrete wrapper, which fails as soon as another layer
// sits on top.
func As[T Store](s Store) (T, bool) {
	for s != nil {
		if t, ok := s.(T); ok {
			return t, true
		}
		l, ok := s.(Layer)
		if !ok {
			break
		}
		s = l.Unwrap()
	}
	var zero T
	return zero, false
}

// Beneath returns the store a layer of type T wraps, found as As finds
// it, or s itself when its stack has no such layer: for reading what an
// object claims below a layer that would judge it (e.g. beneath the
// authentication).
func Beneath[T Layer](s Store) Store {
	if t, ok := As[T](s); ok {
		return t.Unwrap()
	}
	return s
}

// Layers lists s's stack from the top down to the backend: for tests
// and messages that need to see the order.
func Layers(s Store) []Store {
	var out []Store
	for s != nil {
		out = append(out, s)
		l, ok := s.(Layer)
		if !ok {
			break
		}
		s = l.Unwrap()
	}
	return out
}
