package main

import (
	"os"
	"syscall"
)

func ownerOf(st os.FileInfo) (uid, gid int) {
	s := st.Sys().(*syscall.Stat_t)
	return int(s.Uid), int(s.Gid)
}
