module valkyrie.local/pause

go 1.22
