mod sim;
