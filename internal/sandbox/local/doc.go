// Package local is the snapshot backend that runs on the trueforge host itself: builds run
// in bubblewrap inside an unprivileged user and mount namespace ("unshare -Urm"), and
// snapshots are overlayfs layers stacked on a sanitized copy of the host /etc and the
// host /usr.
//
// On-disk layout under the builder root (created 0700):
//
//	snapshots/<id>/           one directory per snapshot, release or build; it appears
//	                          atomically (built in tmp/, then renamed)
//	  meta.json               id, kind ("release" or "snapshot"), base, spec, created
//	  layer/<top>/            the layer: one directory per top-level dir in TopDirs
//	  ready                   written last: the snapshot is complete
//	  manifest                (release) what was copied from the host, hashed into the id
//	  pid                     (build) "<pid> <start time>" of the detached supervisor
//	  run.sh                  (build) the supervisor script (for humans; it runs via sh -c)
//	  build.sh                (build) mounts the overlays and execs bwrap, inside unshare
//	  script.sh               (build) the user's build script
//	  build.log               (build) everything the supervisor and the script printed
//	  started                 (build) the sandbox setup got as far as exec'ing bwrap
//	  exit                    (build) the exit status of the sandbox
//	  failed                  (build) one-line reason; written instead of ready
//	  work/, mnt/             (build) overlay workdirs and mount points; removed when the
//	                          build ends
//	tmp/                      staging and trash; entries older than an hour are swept
//
// A build's state is derived from these files alone, so any process can ask for it.
//
// Overlays are always mounted with the userxattr option, as root and unprivileged alike,
// so that layers built by either can be stacked by either: opaque directories are marked
// with user.overlay.opaque and whiteouts are 0/0 character devices. A runtime stacking the
// layers returned by Builder.Layers must mount them the same way.
package local
