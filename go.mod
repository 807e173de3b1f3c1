module github.com/homesnap/homesnap

go 1.26.8
