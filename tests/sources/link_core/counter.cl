__global int counter = 3;
