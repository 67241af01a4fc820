prénom = "Zoë 😀"
café = f"{prénom} ☕"; print(caffé)
	
print(prénom)
