package resolver

import (
	"context"
	"os"
	"slices"

	"github.com/cudadeps/cudadeps/python/pyenv"
)

// refreshSites asks the interpreter again for its site directories when
// the user's site directory, which it enables, has come to exist since it
// was asked (a round restored distributions there): Python puts that
// directory on sys.path only when it exists, and where it puts it (after a
// virtual environment's own site-packages, before the system's) only the
// interpreter says. The distributions restored there, and the frameworks'
// own searches of sys.path, then count it.
func (t *Target) refreshSites(ctx context.Context) error {
	env := t.Python
	if t.Kind != KindPython || env == nil || !env.FromPython || !env.UserSiteEnabled || env.UserSite == "" || slices.Contains(env.SiteDirs, env.UserSite) {
		return nil
	}
	if st, err := os.Stat(env.UserSite); err != nil || !st.IsDir() {
		return nil
	}
	fresh, err := pyenv.DiscoverCached(ctx, env.Interpreter, t.cache)
	if err != nil {
		return err
	}
	dist, err := fresh.Find(t.Dist.Name)
	if err != nil {
		return err
	}
	t.Python, t.Dist = fresh, dist
	return nil
}
