module example.com/tinyproj

go 1.26
