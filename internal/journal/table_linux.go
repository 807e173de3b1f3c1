//go:build linux

package journal

import "slices"

// node is a watch's place in the table; none is no watch.
type node int32

const none node = -1

// watch is one inotify watch: a directory of the selection, a node of the
// tree of watched directories (its path is its names up to the home), or
// a file with several names. It holds no pointer, nor does most of the
// table, so that collections do not scan it: a million-file home has
// ~300,000 directories and the sidecar holds them all, and with a node of
// pointers each collection marked them all, most of a snapshot's CPU at
// five million files (BENCHMARKS.md: five million files).
type watch struct {
	parent  node   // a directory's: none for the home, and once detached
	name    uint32 // a directory's name in its parent, at table.names[name:]
	wd      int32
	nameLen uint8 // (a name is at most 255 bytes)
	file    bool
	removed bool // removed by us: its last events and IN_IGNORED are expected
	deleted bool // IN_DELETE_SELF seen: IN_IGNORED is expected
}

// table holds the watches. A node keeps its index until compact, which
// runs only where no index is held outside the table (between events):
// a detached tree, a watch removed but not yet ignored, all keep theirs.
type table struct {
	nodes []watch
	names []byte
	kids  map[node][]node // a directory's watched subdirectories, by name
	inos  map[node]uint64 // a file's inode
}

func newTable() table {
	return table{kids: map[node][]node{}, inos: map[node]uint64{}}
}

func (t *table) at(n node) *watch { return &t.nodes[n] } // valid until the next add

// add appends a directory's watch.
func (t *table) add(wd int32, name string, parent node) node {
	n := node(len(t.nodes))
	t.nodes = append(t.nodes, watch{parent: parent, name: uint32(len(t.names)), nameLen: uint8(len(name)), wd: wd})
	t.names = append(t.names, name...)
	return n
}

// addFile appends a file's watch.
func (t *table) addFile(wd int32, ino uint64) node {
	n := node(len(t.nodes))
	t.nodes = append(t.nodes, watch{parent: none, wd: wd, file: true})
	t.inos[n] = ino
	return n
}

// name returns n's name (a copy).
func (t *table) name(n node) string { return string(t.nameBytes(n)) }

func (t *table) nameBytes(n node) []byte {
	w := &t.nodes[n]
	return t.names[w.name : w.name+uint32(w.nameLen)]
}

// compareName orders n's name against name, as strings.Compare.
func (t *table) compareName(n node, name string) int {
	switch b := t.nameBytes(n); {
	case string(b) < name:
		return -1
	case string(b) > name:
		return 1
	}
	return 0
}

func (t *table) find(n node, name string) (int, bool) {
	return slices.BinarySearchFunc(t.kids[n], name, t.compareName)
}

// child returns n's watched subdirectory name, or none.
func (t *table) child(n node, name string) node {
	if i, ok := t.find(n, name); ok {
		return t.kids[n][i]
	}
	return none
}

// addChild makes c the subdirectory of n by c's name, replacing any before it.
func (t *table) addChild(n, c node) {
	i, ok := t.find(n, t.name(c))
	if ok {
		t.kids[n][i] = c
		return
	}
	t.kids[n] = slices.Insert(t.kids[n], i, c)
}

func (t *table) dropChild(n node, name string) {
	if i, ok := t.find(n, name); ok {
		if k := slices.Delete(t.kids[n], i, i+1); len(k) > 0 {
			t.kids[n] = k
		} else {
			delete(t.kids, n)
		}
	}
}

// compact drops the nodes live does not hold, once they are over half of
// the table, and renumbers the rest; live is updated in place. A held
// node whose parent was dropped is detached, as its parent was.
func (t *table) compact(live map[int32]node, top *node) {
	if len(t.nodes) < 1024 || len(t.nodes) < 2*len(live) {
		return
	}
	renum := make(map[node]node, len(live))
	nodes := make([]watch, 0, len(live))
	var names []byte
	for n := range t.nodes {
		old := node(n)
		if live[t.nodes[n].wd] != old {
			continue
		}
		w := t.nodes[n]
		w.name = uint32(len(names))
		names = append(names, t.nameBytes(old)...)
		renum[old] = node(len(nodes))
		nodes = append(nodes, w)
	}
	for i := range nodes {
		if p := nodes[i].parent; p != none {
			if q, ok := renum[p]; ok {
				nodes[i].parent = q
			} else {
				nodes[i].parent = none
			}
		}
	}
	kids := make(map[node][]node, len(t.kids))
	for p, ks := range t.kids {
		q, ok := renum[p]
		if !ok {
			continue
		}
		var nk []node
		for _, k := range ks {
			if r, ok := renum[k]; ok {
				nk = append(nk, r)
			}
		}
		if len(nk) > 0 {
			kids[q] = nk
		}
	}
	inos := make(map[node]uint64, len(t.inos))
	for n, ino := range t.inos {
		if r, ok := renum[n]; ok {
			inos[r] = ino
		}
	}
	for wd, n := range live {
		live[wd] = renum[n]
	}
	if *top != none {
		*top = renum[*top]
	}
	*t = table{nodes: nodes, names: names, kids: kids, inos: inos}
}
