package publish

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
)

// objectFolder names the folder of this publish's objects, data/FOLDER/, before a byte of the
// files is read: a hash of the host and of every file's path and identity (size, modification
// and status-change times, inode, device; see identityOf).
//
// Two publishers get the same folder only if they publish the same files, unchanged, on one host
// (or the same files of one shared file system): then they write the same bytes. Publishers of
// other files, or of these files after any of them changed, get another folder, so they never
// write a key the other's manifest names. A rerun of an interrupted publish of unchanged files
// gets the same folder and finds its stored objects and unfinished uploads there; nothing needs
// to be remembered for it. Where a file's identity is unknown (no status-change time) the folder
// is random: publishes never share a folder, and a rerun starts again in a new one.
func objectFolder(files []localFile) string {
	h := sha256.New()
	fmt.Fprintf(h, "pdq-publish-folder/1\nhost %q\n", hostID())
	for _, f := range files {
		if f.id == nil {
			return randomFolder()
		}
		fmt.Fprintf(h, "%q %d %d %d %d %d\n", f.path, f.id.Size, f.id.ModNs, f.id.ChangeNs, f.id.Inode, f.id.Device)
	}
	return hex.EncodeToString(h.Sum(nil))[:folderLen]
}

func randomFolder() string {
	b := make([]byte, folderLen/2)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// hostID tells this host apart from others that may hold files of the same identities: its
// name and, where there is one, its machine ID.
func hostID() string {
	name, _ := os.Hostname()
	id, _ := os.ReadFile("/etc/machine-id")
	return name + " " + string(bytes.TrimSpace(id))
}
