package fleetnats

import (
	"context"

	"github.com/fleetstate/fleetstate"
)

// FleetOwner implements [fleetstate.OwnedBackend]: the holder of the
// fleet's lease (see [Fleet.Own]).
func (s *store) FleetOwner(ctx context.Context) (fleetstate.Owner, bool, error) {
	rec, ok, err := s.f.Owner(ctx)
	if err != nil || !ok {
		return fleetstate.Owner{}, false, err
	}
	return rec.Owner(), true, nil
}

var _ fleetstate.OwnedBackend = (*store)(nil)
