module bpftel.test/tlsapp

go 1.19
