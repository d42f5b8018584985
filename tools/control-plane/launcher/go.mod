// The launcher of the real-control-plane tests: Lien's own code, standard library only.
module lien.dev/tools/control-plane/launcher

go 1.24.0
