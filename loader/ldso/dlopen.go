package ldso

// DlopenFrom is dlopen(name) called from code in opener, in this process: a
// name already loaded (by the name it was opened under, a name it answered
// to, or its DT_SONAME) is that object; otherwise a name with a slash is
// opened as a path and any other is searched as for a NEEDED entry of
// opener (opener's DT_RPATH chain and the main program's unless opener has
// DT_RUNPATH, LD_LIBRARY_PATH, opener's DT_RUNPATH, the cache, the default
// directories), then what it needs is loaded. A miss is recorded as a
// not-found object (Found false) carrying the directories searched. loaded
// reports that the name was satisfied without loading anything new.
func (p *Process) DlopenFrom(name string, opener *Object) (o *Object, loaded bool) {
	before := len(p.objs)
	o = p.mapObject(name, opener, nil, false)
	if len(p.objs) == before {
		return o, true
	}
	if o.faked {
		// The opener asked for it: a request to satisfy, like a NEEDED entry.
		p.addNeededBy(o, opener)
	} else {
		p.loadDeps([]*Object{o})
		p.checkVersions(p.objs[before:])
	}
	return o, false
}
